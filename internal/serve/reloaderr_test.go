package serve

import (
	"errors"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/config"
)

// On a reload, a profile that cannot be read is named by its file, not by
// the flag that named it at the start (the file was edited, not the flag).
func TestReloadErrNamesTheFile(t *testing.T) {
	inner := errors.New("profile /srv/demo.toml: file is larger than 1 MiB (1048576 bytes), the cap for a profile; check that this is the file you meant")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"read through --profile", &config.Error{Src: config.Source{Origin: config.Flag, Name: "--profile"}, Msg: config.CannotUseProfile, Err: inner},
			"the profile as it is now cannot be used: " + inner.Error()},
		{"read through MLXCEL_PROFILE", &config.Error{Src: config.Source{Origin: config.Env, Name: "MLXCEL_PROFILE"}, Msg: config.CannotUseProfile, Err: inner},
			"the profile as it is now cannot be used: " + inner.Error()},
		{"a bad value at its line", &config.Error{Src: config.Source{Origin: config.Profile, Name: "/srv/demo.toml:3"}, Msg: "want an integer"},
			"profile /srv/demo.toml:3: want an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := reloadErr(tc.err)
			if got.Error() != tc.want || strings.Contains(got.Error(), "flag --profile") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if !errors.Is(got, tc.err) && !errors.Is(got, inner) {
				t.Error("the error does not wrap what it names")
			}
		})
	}
}
