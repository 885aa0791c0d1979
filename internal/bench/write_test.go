package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckWritable: CheckWritable refuses exactly the output paths Write
// would fail on, naming what is in the way, and leaves nothing behind: a
// directory as the stem (its files would be the hidden DIR/.md) and a
// directory that does not exist (a typo is not made) among them.
func TestCheckWritable(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "md", "sweep.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, base, want string // want "" = writable
	}{
		{"existing directory", filepath.Join(dir, "sweep"), ""},
		{"a directory that does not exist", filepath.Join(dir, "a", "b", "sweep"), "directory " + filepath.Join(dir, "a", "b") + " does not exist"},
		{"an existing directory", dir, dir + " is a directory"},
		{"a trailing slash", filepath.Join(dir, "new") + "/", filepath.Join(dir, "new") + "/ names a directory"},
		{"an existing directory with its slash", dir + "/", dir + "/ names a directory"},
		{"a device", "/dev/null", "/dev/null is not a regular file"},
		{"a file as the directory", filepath.Join(file, "sweep"), file + " is not a directory"},
		{"a file further up", filepath.Join(file, "a", "b", "sweep"), file + " is not a directory"},
		{"a device as the directory", "/dev/null/x", "/dev/null is not a directory"},
		{"the .md is a directory", filepath.Join(dir, "md", "sweep"), "sweep.md is a directory"},
		{"a directory that takes no files", "/proc/speclaunch-sweep", "cannot create files in /proc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckWritable(tc.base)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("CheckWritable(%s) = %v, want %q", tc.base, err, tc.want)
			}
			werr := Write(simFixture(), tc.base, true)
			if (werr == nil) != (err == nil) {
				t.Errorf("Write: %v, but CheckWritable: %v", werr, err)
			}
		})
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".speclaunch-write-check-*"))
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}
