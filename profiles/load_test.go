package profiles

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/safefile/safefiletest"
)

// TestLoadShapes: a profile path that is not a usable file is refused at
// once with a *safefile.Error naming it; an empty profile is a valid one.
func TestLoadShapes(t *testing.T) {
	p := safefiletest.Make(t, "p.toml", safefile.ProfileLimit+1)
	for shape, msg := range safefiletest.Refused("1 MiB") {
		t.Run(shape, func(t *testing.T) {
			var err error
			safefiletest.Within(t, func() { _, err = Load(context.Background(), p[shape]) })
			var se *safefile.Error
			if !errors.As(err, &se) || !strings.Contains(err.Error(), p[shape]) || !strings.Contains(err.Error(), msg) {
				t.Fatalf("got %v; want a *safefile.Error naming %s and saying %q", err, p[shape], msg)
			}
		})
	}
	pr, err := Load(context.Background(), p[safefiletest.Empty])
	if err != nil || pr.Path != p[safefiletest.Empty] {
		t.Fatalf("empty profile: %+v, %v; want a valid empty profile", pr, err)
	}
}
