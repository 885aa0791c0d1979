package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchOutCheckedFirst: an output path that cannot be written is bad
// input before any engine starts (a sweep takes hours on real hardware),
// naming where the path came from: a directory as the stem and a missing
// directory (made by nothing) among them.
func TestBenchOutCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.toml")
	writeFile(t, prof, "[engine]\nname = \"sim\"\n\n[bench]\nout = \"/dev/null/rec\"\n")
	base := []string{"bench", "--engine", "sim", "-m", "t", "-md", "d", "--widths", "2", "--rounds", "3"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"flag", []string{"--out", "/dev/null/x"}, "flag --out: the record cannot be written to /dev/null/x: /dev/null is not a directory"},
		{"profile", []string{"--profile", prof}, "profile " + prof + ":5: the record cannot be written to /dev/null/rec"},
		{"a directory", []string{"--out", dir}, "flag --out: the record cannot be written to " + dir + ": " + dir + " is a directory, and a record is three files named from a stem; give --out (profile bench.out) a file stem in an existing directory you can write to, e.g. DIR/run1"},
		{"a trailing slash", []string{"--out", dir + "/"}, "flag --out: the record cannot be written to " + dir + "/: " + dir + "/ names a directory"},
		{"a missing directory", []string{"--out", filepath.Join(dir, "no", "such", "x")}, "directory " + filepath.Join(dir, "no", "such") + " does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A safety net only: with the check in place the command returns at once.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := MainContext(ctx, append(base, tc.args...), policyTOML, &stdout, &stderr, nil)
			if got := strings.ReplaceAll(stderr.String(), "\n  ", " "); code != 2 || !strings.Contains(got, tc.want) { // unwrapped
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tc.want)
			}
			if strings.Contains(stderr.String(), "bench starting") {
				t.Errorf("an engine started before the check: %s", stderr.String())
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 1 {
				t.Errorf("the check left %v, want only the profile", left)
			}
		})
	}
}
