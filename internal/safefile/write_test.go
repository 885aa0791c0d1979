package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Existing tells a path free for a new file from a regular file, and
// names everything else with the fix; WriteFile replaces what is there,
// never writing through a FIFO (which would block for good) or a symlink.
func TestExistingAndWriteFile(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	if err := os.WriteFile(at("regular"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(at("fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(at("dir"), 0o755)
	os.Symlink(at("regular"), at("link-regular"))
	os.Symlink(at("fifo"), at("link-fifo"))
	os.Symlink(at("nowhere"), at("dangling"))
	os.Symlink(at("loop"), at("loop"))
	for _, c := range []struct {
		name   string
		exists bool
		errSub string
	}{
		{"missing", false, ""},
		{"regular", true, ""},
		{"link-regular", true, ""},
		{"fifo", true, "is a FIFO (named pipe), not a regular file"},
		{"dir", true, "is a directory, not a regular file"},
		{"link-fifo", true, "is a symlink to a FIFO (named pipe)"},
		{"dangling", true, "is a symlink to " + at("nowhere") + ", which leads nowhere (no such file or directory)"},
		{"loop", true, "is a symlink to " + at("loop") + ", which leads nowhere (too many levels of symbolic links)"},
	} {
		exists, err := Existing("profile", at(c.name))
		var se *Error
		if exists != c.exists || (c.errSub == "") != (err == nil) || err != nil && (!strings.Contains(err.Error(), c.errSub) || !errors.As(err, &se)) {
			t.Errorf("%s: exists %v, err %v; want %v and an *Error containing %q", c.name, exists, err, c.exists, c.errSub)
		}
	}
	for _, name := range []string{"fifo", "dangling", "new"} {
		if err := WriteFile(at(name), []byte("written"), 0o600); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fi, err := os.Lstat(at(name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: after WriteFile %v, %v: want a regular file, mode 0600", name, fi, err)
		}
	}
	if _, err := os.Lstat(at("nowhere")); err == nil {
		t.Error("WriteFile wrote through the dangling symlink")
	}
	// A symlink to a regular file stays a symlink, its file rewritten.
	if err := WriteFile(at("link-regular"), []byte("through"), 0o644); err != nil {
		t.Fatal(err)
	}
	if li, _ := os.Lstat(at("link-regular")); li == nil || li.Mode()&os.ModeSymlink == 0 {
		t.Error("the symlink to a regular file was replaced")
	}
	if b, _ := os.ReadFile(at("regular")); string(b) != "through" {
		t.Errorf("the linked file holds %q, want the new content", b)
	}
	if left, _ := filepath.Glob(at(".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// Replace puts a regular file at path whatever is there: a symlink to a
// regular file is replaced, its target left as it was.
func TestReplaceNeverFollows(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "target"), filepath.Join(dir, "link")
	if err := os.WriteFile(target, []byte("target"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := Replace(link, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if li, err := os.Lstat(link); err != nil || !li.Mode().IsRegular() || li.Mode().Perm() != 0o600 {
		t.Errorf("after Replace %v, %v: want a regular file, mode 0600", li, err)
	}
	if b, _ := os.ReadFile(target); string(b) != "target" {
		t.Errorf("the link's target holds %q: Replace wrote through the link", b)
	}
	if b, _ := os.ReadFile(link); string(b) != "new" {
		t.Errorf("%s holds %q, want the new content", link, b)
	}
}

// WriteOwn puts a regular file at path whatever is there and says which
// link it replaced: a symlink to a regular file is replaced, its target
// left as it was (content and mode), where WriteFile writes through it.
func TestWriteOwnReplacesALink(t *testing.T) {
	for _, c := range []struct {
		name   string
		make   func(t *testing.T, path, target string) // what is at path before
		link   bool                                    // WriteOwn says it replaced a link to target
		kept   bool                                    // target exists after, as it was
		before string                                  // target's content before
	}{
		{"nothing there", func(t *testing.T, path, target string) {}, false, false, ""},
		{"a regular file", func(t *testing.T, path, target string) {
			must(t, os.WriteFile(path, []byte("old"), 0o644))
		}, false, false, ""},
		{"a symlink to a regular file", func(t *testing.T, path, target string) {
			must(t, os.WriteFile(target, []byte("theirs"), 0o644))
			must(t, os.Symlink(target, path))
		}, true, true, "theirs"},
		{"a dangling symlink", func(t *testing.T, path, target string) {
			must(t, os.Symlink(target, path))
		}, true, false, ""},
		{"a symlink to a FIFO", func(t *testing.T, path, target string) {
			must(t, syscall.Mkfifo(target, 0o644))
			must(t, os.Symlink(target, path))
		}, true, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path, target := filepath.Join(dir, "state.json"), filepath.Join(dir, "elsewhere")
			c.make(t, path, target)
			link, err := WriteOwn(path, []byte("new"), 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]string{true: target, false: ""}[c.link]; link != want {
				t.Errorf("WriteOwn says it replaced a link to %q, want %q", link, want)
			}
			li, err := os.Lstat(path)
			if err != nil || !li.Mode().IsRegular() || li.Mode().Perm() != 0o600 {
				t.Errorf("after WriteOwn %v, %v: want a regular file, mode 0600", li, err)
			}
			if b, _ := os.ReadFile(path); string(b) != "new" {
				t.Errorf("%s holds %q, want the new content", path, b)
			}
			if c.kept {
				fi, err := os.Stat(target)
				if b, _ := os.ReadFile(target); string(b) != c.before || err != nil || fi.Mode().Perm() != 0o644 {
					t.Errorf("the link's target holds %q (%v, %v), want %q, mode 0644 as it was", b, fi, err, c.before)
				}
			} else if fi, err := os.Lstat(target); err == nil && fi.Mode().IsRegular() {
				t.Errorf("WriteOwn created %s through the link", target)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
