package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
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
			want: "profile {dir}/typo/sub/p.toml: directory {dir}/typo/sub does not exist speclaunch: hint: create the directory first (mkdir -p {dir}/typo/sub), or name a file in an existing directory",
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

// `profile init --from demo-load` writes the stand-in files the profile
// names beside it, under the profile's rules: it wrote the profile alone,
// pointing at files that were not there (tune then hashed their names).
func TestProfileInitStandIns(t *testing.T) {
	example, _ := profiles.Example("demo-load")
	standIns := profiles.StandIns("demo-load")
	if len(standIns) != 2 {
		t.Fatalf("demo-load ships %d stand-ins, want 2", len(standIns))
	}
	target := filepath.Join("demo-load", "target.txt")
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		force bool
		code  int
		want  string // in the output, unwrapped; {dir} is the directory
		wrote bool   // the profile and every stand-in hold the example's bytes
	}{
		{name: "a new directory", code: 0, want: "wrote {dir}/p.toml, {dir}/demo-load/drafter.txt, {dir}/demo-load/target.txt", wrote: true},
		{name: "run again", code: 0, want: "already holds that example", wrote: true,
			setup: func(t *testing.T, dir string) { initDemoLoad(t, dir) }},
		{name: "a stand-in gone", code: 0, want: "wrote {dir}/demo-load/target.txt (", wrote: true,
			setup: func(t *testing.T, dir string) { initDemoLoad(t, dir); os.Remove(filepath.Join(dir, target)) }},
		{name: "a stand-in of other bytes", code: 2, want: "{dir}/demo-load/target.txt already exists speclaunch: hint: pass --force",
			setup: func(t *testing.T, dir string) {
				mkdir(t, dir, "demo-load")
				writeFile(t, filepath.Join(dir, target), "mine")
			}},
		{name: "--force over a stand-in", force: true, code: 0, want: "wrote ", wrote: true,
			setup: func(t *testing.T, dir string) {
				mkdir(t, dir, "demo-load")
				writeFile(t, filepath.Join(dir, target), "mine")
			}},
		{name: "--force over a symlinked stand-in", force: true, code: 2, want: "{dir}/demo-load/target.txt is a symbolic link to {dir}/mine.txt",
			setup: func(t *testing.T, dir string) {
				mkdir(t, dir, "demo-load")
				writeFile(t, filepath.Join(dir, "mine.txt"), "mine")
				symlink(t, filepath.Join(dir, "mine.txt"), filepath.Join(dir, target))
			}},
		{name: "a symlinked stand-in directory", code: 2, want: "{dir}/demo-load is a symbolic link, not a directory; remove it",
			setup: func(t *testing.T, dir string) {
				mkdir(t, dir, "elsewhere")
				symlink(t, filepath.Join(dir, "elsewhere"), filepath.Join(dir, "demo-load"))
			}},
		{name: "a file in the way of the directory", code: 2, want: "{dir}/demo-load is a regular file, not a directory",
			setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "demo-load"), "x") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			args := []string{"profile", "init", "--from", "demo-load", filepath.Join(dir, "p.toml")}
			if tc.force {
				args = append(args, "--force")
			}
			var out bytes.Buffer
			code := MainContext(context.Background(), args, policyTOML, &out, &out, nil)
			got := strings.ReplaceAll(strings.ReplaceAll(out.String(), "\n  ", " "), "\n", " ")
			if want := strings.ReplaceAll(tc.want, "{dir}", dir); code != tc.code || !strings.Contains(got, want) {
				t.Errorf("exit %d, want %d and %q:\n%s", code, tc.code, want, out.String())
			}
			if tc.wrote {
				wantContent(t, filepath.Join(dir, "p.toml"), string(example))
				for _, si := range standIns {
					wantContent(t, filepath.Join(dir, filepath.FromSlash(si.Rel)), string(si.Data))
				}
			} else if _, err := os.Stat(filepath.Join(dir, "p.toml")); err == nil {
				t.Error("a refused init wrote the profile")
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "demo-load", ".*")); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

func initDemoLoad(t *testing.T, dir string) {
	t.Helper()
	var out bytes.Buffer
	if code := MainContext(context.Background(), []string{"profile", "init", "--from", "demo-load", filepath.Join(dir, "p.toml")}, policyTOML, &out, &out, nil); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
}

func mkdir(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// Every example `profile init --from` takes is listed in its --help and in
// docs/profiles.md: demo-load, vllm-… and sglang-… were missing from both.
func TestProfileInitFromNamesListed(t *testing.T) {
	f, _ := reflect.TypeFor[ProfileInitCmd]().FieldByName("From")
	doc, err := os.ReadFile("../../docs/profiles.md")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for l := range strings.Lines(string(doc)) {
		if strings.Contains(l, "profile init --from") && strings.Contains(l, "start from an example:") {
			line = l
		}
	}
	names := profiles.ExampleNames()
	if len(names) < 7 {
		t.Fatalf("examples %v", names)
	}
	for _, n := range names {
		for _, c := range []struct{ where, text string }{{"--from's help", f.Tag.Get("help")}, {"docs/profiles.md's profile init line", line}} {
			if !regexp.MustCompile(`[:,] ` + regexp.QuoteMeta(n) + `\b[^-]`).MatchString(c.text + " ") {
				t.Errorf("%s does not list example %s: %q", c.where, n, c.text)
			}
		}
	}
}
