package cli

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/speclaunch/speclaunch/internal/config"
)

// The files a load names for serve to watch are the same whether it
// succeeds or is rejected, and name the tuned layer even where it does
// not exist: after one rejected reload the tuned layer left the watch
// set, and a layer tune wrote while serve ran was never watched.
func TestLoadNamesTheTunedLayerToWatch(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg")
	tuned := filepath.Join(cfg, "speclaunch", TunedFile)
	prof := filepath.Join(dir, "p.toml")
	pol := filepath.Join(dir, "pol.toml")
	writeFile(t, prof, "[engine]\nname = \"sim\"\n")
	const good, bad = "schema = 1\n", "schema = [\n"
	for _, c := range []struct {
		name       string
		tuned, pol string // file contents; "" = absent
		noConfig   bool   // neither XDG_CONFIG_HOME nor HOME
		policies   []string
		wantErr    bool
		want       []string
	}{
		{name: "tuned layer present", tuned: good, pol: good, policies: []string{pol}, want: []string{prof, tuned, pol}},
		{name: "tuned layer absent", pol: good, policies: []string{pol}, want: []string{prof, tuned, pol}},
		{name: "policy file rejected", tuned: good, pol: bad, policies: []string{pol}, wantErr: true, want: []string{prof, tuned, pol}},
		{name: "policy file missing", tuned: good, policies: []string{pol}, wantErr: true, want: []string{prof, tuned, pol}},
		{name: "tuned layer rejected", tuned: bad, pol: good, policies: []string{pol}, wantErr: true, want: []string{prof, tuned, pol}},
		{name: "tuned layer named as a policy file", tuned: good, policies: []string{tuned, pol, tuned}, pol: good, want: []string{prof, pol, tuned}},
		{name: "no config directory", pol: good, noConfig: true, policies: []string{pol}, want: []string{prof, pol}},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.RemoveAll(cfg)
			os.Remove(pol)
			if c.tuned != "" {
				if err := os.MkdirAll(filepath.Dir(tuned), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, tuned, c.tuned)
			}
			if c.pol != "" {
				writeFile(t, pol, c.pol)
			}
			getenv := func(k string) string {
				if k == "XDG_CONFIG_HOME" && !c.noConfig {
					return cfg
				}
				return ""
			}
			e := &Env{Getenv: getenv, PolicyTOML: policyTOML, Ctx: context.Background()}
			l, err := e.loadNamed(config.Input{Flags: map[string]string{"profile": prof}, Policies: c.policies})
			if (err != nil) != c.wantErr || l == nil {
				t.Fatalf("err = %v, want an error: %v", err, c.wantErr)
			}
			if !slices.Equal(l.Files, c.want) {
				t.Errorf("files %q, want %q", l.Files, c.want)
			}
		})
	}
}
