package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/profiles"
)

// `profile init PATH` writes into a directory that exists: a missing one
// is refused naming it and the fix (it was created, a typo building a
// tree), as bench --out is. With --force it replaces a file, but a
// symbolic link at PATH is refused (it was written through, to the link's
// target), and nothing is left half-written.
func TestProfileInit(t *testing.T) {
	example, err := profiles.Example("demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string) // before the run
		path  string                         // under dir
		force bool
		code  int
		want  string                         // in the output, unwrapped
		check func(t *testing.T, dir string) // after the run
	}{
		{name: "a new file", path: "p.toml", code: 0, want: "wrote "},
		{name: "a missing directory", path: "typo/sub/p.toml", code: 2,
			want: "profile {dir}/typo/sub/p.toml: directory {dir}/typo/sub does not exist speclaunch: hint: create the directory first (mkdir -p {dir}/typo/sub), or give a path in an existing directory",
			check: func(t *testing.T, dir string) {
				if _, err := os.Stat(filepath.Join(dir, "typo")); err == nil {
					t.Error("profile init created the missing directory")
				}
			}},
		{name: "a file in the way of the directory", path: "file/p.toml", code: 2, want: "{dir}/file is not a directory",
			setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "file"), "x") }},
		{name: "an existing file", path: "p.toml", code: 2, want: "already exists",
			setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "p.toml"), "mine") },
			check: func(t *testing.T, dir string) { wantContent(t, filepath.Join(dir, "p.toml"), "mine") }},
		{name: "--force over a file", path: "p.toml", force: true, code: 0, want: "wrote ",
			setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "p.toml"), "mine") }},
		{name: "--force over a symlink", path: "link.toml", force: true, code: 2,
			want: "{dir}/link.toml is a symbolic link to {dir}/target.toml; remove it or give the target's path",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "target.toml"), "target")
				if err := os.Symlink(filepath.Join(dir, "target.toml"), filepath.Join(dir, "link.toml")); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, dir string) {
				wantContent(t, filepath.Join(dir, "target.toml"), "target")
				if li, err := os.Lstat(filepath.Join(dir, "link.toml")); err != nil || li.Mode()&os.ModeSymlink == 0 {
					t.Errorf("the symlink was replaced: %v", err)
				}
			}},
		{name: "a symlink, no --force", path: "link.toml", code: 2, want: "already exists",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "target.toml"), "target")
				if err := os.Symlink(filepath.Join(dir, "target.toml"), filepath.Join(dir, "link.toml")); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, dir string) { wantContent(t, filepath.Join(dir, "target.toml"), "target") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			path := filepath.Join(dir, tc.path)
			args := []string{"profile", "init", "--from", "demo", path}
			if tc.force {
				args = append(args, "--force")
			}
			var out bytes.Buffer
			code := MainContext(context.Background(), args, policyTOML, &out, &out, nil)
			got := strings.ReplaceAll(out.String(), "\n  ", " ") // unwrapped
			got = strings.ReplaceAll(got, "\n", " ")
			if want := strings.ReplaceAll(tc.want, "{dir}", dir); code != tc.code || !strings.Contains(got, want) {
				t.Errorf("exit %d, want %d and %q:\n%s", code, tc.code, want, out.String())
			}
			if tc.code == 0 {
				wantContent(t, path, string(example))
			}
			if tc.check != nil {
				tc.check(t, dir)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

// Without PATH, profile init writes profiles/NAME.toml, making profiles/
// where it is missing: that directory is its own default, not a typo.
func TestProfileInitDefaultPath(t *testing.T) {
	t.Chdir(t.TempDir())
	var out bytes.Buffer
	if code := MainContext(context.Background(), []string{"profile", "init", "--from", "demo"}, policyTOML, &out, &out, nil); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	example, _ := profiles.Example("demo")
	wantContent(t, filepath.Join("profiles", "demo.toml"), string(example))
}

func wantContent(t *testing.T, path, want string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != want {
		t.Errorf("%s holds %.40q (%v), want %.40q", path, b, err, want)
	}
}
