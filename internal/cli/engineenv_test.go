package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/config"
)

// engine.env written as a string, number, boolean or array validated "ok"
// and was dropped, so the engine served without its key; under a running
// serve, an edit from the table to the string form was applied (the
// engine restarted without the key). Each is refused where the profile is
// read: validate and serve exit 2 with the file:line and the fix, and a
// reload's read fails, so that serve keeps the settings in force. The
// value is never shown.
func TestEngineEnvNotATableIsRefused(t *testing.T) {
	const val = "abc12345"
	const fix = "engine.env: is %s, want a table: write [engine.env] on a line of its own"
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.toml")
	head := "[engine]\nname = \"sim\"\n"
	tail := "[model]\npath = \"demo-target\"\nquant = \"affine\"\n[draft]\nmodel = \"demo-drafter\"\n"
	for _, tc := range []struct{ env, kind string }{
		{`"LLAMA_API_KEY=` + val + `"`, "a string"},
		{"5", "an integer"},
		{"true", "a boolean"},
		{`["LLAMA_API_KEY=` + val + `"]`, "an array"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			writeFile(t, prof, head+"env = "+tc.env+"\n"+tail)
			want := prof + ":3: " + strings.Replace(fix, "%s", tc.kind, 1)
			for _, args := range [][]string{{"profile", "validate", "--profile", prof}, {"serve", "--dry-run", "--profile", prof}} {
				code, o, e := runCLI(t, args...)
				if out := unwrap(o + e); code != 2 || !strings.Contains(out, want) || strings.Contains(out, val) {
					t.Errorf("%q: exit %d, want 2 and %q, the value not shown:\n%s", args, code, want, out)
				}
			}

			// A reload: the table is read, then the edit is refused.
			writeFile(t, prof, head+"[engine.env]\nLLAMA_API_KEY = \""+val+"\"\n"+tail)
			e := &Env{Getenv: func(string) string { return "" }, PolicyTOML: policyTOML, Ctx: context.Background()}
			in := config.Input{Flags: map[string]string{"profile": prof}, Getenv: e.Getenv}
			ld, err := serveLoader{e, in}.Load()
			if err != nil || ld.Settings().EngineEnv.Value["LLAMA_API_KEY"] != val {
				t.Fatalf("the table: %v, %v", err, ld)
			}
			writeFile(t, prof, head+"env = "+tc.env+"\n"+tail)
			ld, err = serveLoader{e, in}.Load()
			if err == nil || ld != nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), val) {
				t.Errorf("the edit: load %v, %v; want it refused with %q, the value not shown", ld, err, want)
			}
		})
	}
}
