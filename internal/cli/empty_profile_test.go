package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// An empty profile (no bytes, or nothing but whitespace, comments and table
// headers) is accepted at start, as serve keeps one that was empty when it
// started (docs/profiles.md), but every command that reads it says so:
// validate said "ok" and resolve and serve --dry-run nothing at all.
func TestEmptyProfileWarns(t *testing.T) {
	t.Parallel() // its tuned layer is its own (withEnv)
	dir := t.TempDir()
	run := withEnv(map[string]string{"XDG_CONFIG_HOME": filepath.Join(dir, "cfg")})
	launch := []string{"--engine", "sim", "-m", "demo-target", "-md", "demo-drafter", "--capability", "12.1", "--quant", "affine"}
	for _, tc := range []struct {
		name, text string
		warns      bool
	}{
		{"no bytes", "", true},
		{"whitespace and comments", "\n  \n# port = 8080\n", true},
		{"a table header alone", "[server]\n", true},
		{"one setting", "[server]\nport = 18460\n", false},
	} {
		prof := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".toml")
		writeFile(t, prof, tc.text)
		want := "profile " + prof + " is empty (nothing but whitespace, comments or table headers): every setting comes from flags, the environment and defaults"
		for _, args := range [][]string{
			{"profile", "validate", "--profile", prof},
			append([]string{"resolve", "--profile", prof}, launch...),
			append([]string{"serve", "--dry-run", "--profile", prof}, launch...),
		} {
			code, o, e := run.cli(args...)
			out := strings.ReplaceAll(o+e, "\n  ", " ")
			if code != 0 || strings.Contains(out, want) != tc.warns {
				t.Errorf("%s: %v: exit %d, warns %v, want exit 0 and warns %v; output:\n%s", tc.name, args[:2], code, !tc.warns, tc.warns, o+e)
			}
		}
	}
}
