package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/config"
)

// deepTOML are the shapes of issue 20 that overflowed the decoder's stack
// or took gigabytes: each goes past the guard's depth on line 3.
var deepTOML = map[string]string{
	"2,000,000 nested arrays":     "a = " + strings.Repeat("[", 2_000_000) + strings.Repeat("]", 2_000_000),
	"20,000 nested inline tables": "a = " + strings.Repeat("{b = ", 20_000) + "1" + strings.Repeat("}", 20_000),
	"5,000 nested inline tables":  "a = " + strings.Repeat("{b = ", 5_000) + "1" + strings.Repeat("}", 5_000),
}

// TestDeepTOMLExit2: a deeply nested profile or policy file is bad input
// at once, exit 2, with its file and line, from every command that reads it.
func TestDeepTOMLExit2(t *testing.T) {
	dir := t.TempDir()
	for shape, body := range deepTOML {
		path := filepath.Join(dir, strings.NewReplacer(",", "", " ", "-").Replace(shape)+".toml")
		writeFile(t, path, "# a file that nests too deep\n\n"+body+"\n")
		for _, args := range [][]string{
			{"profile", "validate", "--profile", path},
			{"resolve", "--profile", path},
			{"resolve", "--policy", path},
			{"policy", "list", "--policy", path},
		} {
			t.Run(shape+"/"+strings.Join(args[:len(args)-1], " "), func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				code := MainContext(context.Background(), args, policyTOML, &stdout, &stderr, nil)
				if code != 2 {
					t.Errorf("exit %d, want 2; stderr %s", code, stderr.String())
				}
				if want := path + ":3: nested more than"; !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr %q: want %q", stderr.String(), want)
				}
			})
		}
	}
}

// TestReloadLoadRefusesDeepTOML: serve's reload re-runs Env.load; a deep
// file saved under a running server is a bad-input error it logs, never a
// crash that would take the engine down.
func TestReloadLoadRefusesDeepTOML(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.toml")
	pol := filepath.Join(dir, "pol.toml")
	writeFile(t, prof, "[engine]\nname = \"sim\"\n")
	writeFile(t, pol, "schema = 1\n")
	e := &Env{Getenv: func(string) string { return "" }, PolicyTOML: policyTOML, Ctx: context.Background()}
	in := config.Input{Flags: map[string]string{"profile": prof}, Policies: []string{pol}}
	if _, err := e.load(in); err != nil {
		t.Fatalf("the valid files: %v", err)
	}
	for _, file := range []string{prof, pol} {
		for shape, body := range deepTOML {
			t.Run(filepath.Base(file)+"/"+shape, func(t *testing.T) {
				writeFile(t, prof, "[engine]\nname = \"sim\"\n")
				writeFile(t, pol, "schema = 1\n")
				writeFile(t, file, "\n\n"+body)
				_, err := e.load(in)
				if err == nil || !isBadInput(err) || !strings.Contains(err.Error(), file+":3: nested more than") {
					t.Errorf("err = %v, want bad input naming %s:3 and the nesting", err, file)
				}
			})
		}
	}
}
