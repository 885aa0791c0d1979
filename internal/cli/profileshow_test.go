package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// showProfile is a profile for profile show, with an [engine.env] of a
// secret-named variable, one secret by its shape and a plain one.
func showProfile(t *testing.T) string {
	t.Helper()
	prof := filepath.Join(t.TempDir(), "p.toml")
	writeFile(t, prof, "[engine]\nname = \"sim\"\n[model]\npath = \"demo-target\"\nquant = \"affine\"\n"+
		"[engine.env]\nLLAMA_API_KEY = \"LEAKCHECKKEY-0123456789\"\nAUTH = \"Bearer sk-LeakCheckAbcdef9876\"\nFOO = \"bar\"\n")
	return prof
}

// profileShowJSON is profile show --json's settings.
func profileShowJSON(t *testing.T, prof string) map[string]Setting {
	t.Helper()
	code, o, e := runCLI(t, "profile", "show", "--json", "--profile", prof)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	var got struct {
		Settings map[string]Setting `json:"settings"`
	}
	if err := json.Unmarshal([]byte(o), &got); err != nil {
		t.Fatal(err)
	}
	return got.Settings
}

// profile show's sources stand in one column: a value longer than the
// others (bench-base-port's default, "none: a free loopback port per arm,
// drawn at random in 20000-31999") pushed its source out of line.
func TestProfileShowAlignsSources(t *testing.T) {
	prof := showProfile(t)
	code, text, e := runCLI(t, "profile", "show", "--profile", prof)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	settings := profileShowJSON(t, prof)
	col, rows := -1, 0
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(line, "  ") {
			continue
		}
		s, ok := settings[f[0]]
		if !ok {
			t.Fatalf("%q: no such setting in --json", line)
		}
		at := strings.LastIndex(line, " "+s.Source) + 1
		if col < 0 {
			col = at
		}
		if at != col || !strings.HasSuffix(line, s.Source) {
			t.Errorf("the source of %s is at column %d, want %d:\n%s", f[0], at, col, text)
		}
		rows++
	}
	if rows != len(settings) {
		t.Errorf("%d rows printed, %d settings", rows, len(settings))
	}
}
