package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// A tuned layer that is a symlink leading nowhere (dangling, or a loop) is
// bad input naming the link and its target: resolve skipped it in silence,
// and tune replaced the link with a file of its own. Nothing there is no
// layer, as before.
func TestTunedLayerLinkThatLeadsNowhere(t *testing.T) {
	t.Parallel() // its tuned layers are its own (withEnv)
	const prof = "../../profiles/demo-load.toml"
	for _, c := range []struct {
		name   string
		target func(link string) string // "" = no link: nothing there
		cause  string
	}{
		{"absent", nil, ""},
		{"dangling", func(string) string { return "/nonexistent/tuned.toml" }, "no such file or directory"},
		{"loop", func(link string) string { return link }, "too many levels of symbolic links"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := t.TempDir()
			layer := filepath.Join(cfg, "speclaunch", TunedFile)
			other := filepath.Join(t.TempDir(), "mine.toml") // tune --policy's layer
			want := []string{"exit 0"}
			if c.target != nil {
				if err := os.MkdirAll(filepath.Dir(layer), 0o755); err != nil {
					t.Fatal(err)
				}
				for _, l := range []string{layer, other} {
					if err := os.Symlink(c.target(l), l); err != nil {
						t.Fatal(err)
					}
				}
			}
			run := withEnv(map[string]string{"XDG_CONFIG_HOME": cfg})
			code, o, e := run.cli("resolve", "--profile", prof)
			if c.target == nil {
				if code != 0 {
					t.Fatalf("resolve with no tuned layer: exit %d\n%s%s", code, o, e)
				}
				return
			}
			want = []string{layer + ": is a symlink to " + c.target(layer) + ", which leads nowhere (" + c.cause + ")", "delete it and re-run speclaunch tune"}
			checkRefused(t, "resolve", code, e, want)
			// tune is refused before it measures, the link left as it was:
			// the default layer, and a layer named with --policy.
			code, _, e = run.cli("tune", "--profile", prof, "--levels", "1", "--widths", "2", "--engines", "2")
			checkRefused(t, "tune", code, e, want)
			code, _, e = withEnv(map[string]string{"XDG_CONFIG_HOME": t.TempDir()}).cli("tune", "--profile", prof, "--levels", "1", "--widths", "2", "--engines", "2", "--policy", other)
			checkRefused(t, "tune --policy", code, e, []string{other + ": is a symlink to " + c.target(other) + ", which leads nowhere", "point the link at a file, or remove it"})
			for _, l := range []string{layer, other} {
				if li, err := os.Lstat(l); err != nil || li.Mode()&os.ModeSymlink == 0 {
					t.Errorf("%s is no longer the link: %v %v", l, li, err)
				}
			}
		})
	}
}

// A profile or policy file named by a symlink that leads nowhere (a loop,
// or dangling) is refused naming the link, its target and what to do, as
// the tuned layer is: a --profile loop said only "too many levels of
// symbolic links", a --policy one "check the path".
func TestProfileOrPolicyLinkThatLeadsNowhere(t *testing.T) {
	dir := t.TempDir()
	loop, dangling := filepath.Join(dir, "loop.toml"), filepath.Join(dir, "dangling.toml")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nonexistent/p.toml", dangling); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"a profile's loop", []string{"resolve", "--profile", loop}, "flag --profile: cannot use profile: profile " + loop + ": is a symlink to " + loop + ", which leads nowhere (too many levels of symbolic links); remove it or give another path"},
		{"a profile's dangling link", []string{"profile", "validate", "--profile", dangling}, "profile " + dangling + ": is a symlink to /nonexistent/p.toml, which leads nowhere (no such file or directory); remove it or give another path"},
		{"a policy file's loop", []string{"resolve", "--engine", "sim", "-m", "t", "--policy", loop}, "flag --policy: cannot use policy file: policy file " + loop + ": is a symlink to " + loop + ", which leads nowhere (too many levels of symbolic links); remove it or give another path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, e := runCLI(t, c.args...)
			checkRefused(t, c.name, code, e, []string{c.want})
		})
	}
}

// An empty tuned layer (no bytes, or only whitespace and comments: a
// layer truncated to drop its schedules) is no entries, said by one warn
// line naming it and how to remove it; resolve and serve stopped with exit
// 2 ("missing schema"). A layer with anything in it needs its schema, and
// an empty file named with --policy is refused as any policy file is.
func TestEmptyTunedLayer(t *testing.T) {
	t.Parallel() // its tuned layers are its own (withEnv)
	const prof = "../../profiles/demo-load.toml"
	for _, c := range []struct {
		name, text string
		args       []string
		code       int
		want       string // in stdout and stderr, unwrapped; LAYER the layer's path
	}{
		{"0 bytes, resolve", "", []string{"resolve", "--profile", prof}, 0, "warn: the tuned layer LAYER is empty (nothing but whitespace and comments): it holds no tuned schedule; delete it (rm LAYER)"},
		{"comments, resolve", "# speclaunch's tuned layer\n\n  # emptied\n", []string{"resolve", "--profile", prof}, 0, "warn: the tuned layer LAYER is empty"},
		{"0 bytes, serve --dry-run", "", []string{"serve", "--profile", prof, "--dry-run", "--port", "18118"}, 0, "the tuned layer LAYER is empty"},
		{"no schema", "# x\n[[entry]]\nid = \"t\"\n", []string{"resolve", "--profile", prof}, 2, "LAYER:1: missing schema"},
		{"an empty --policy file", "", []string{"resolve", "--profile", prof, "--policy", "LAYER"}, 2, "LAYER:1: missing schema"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := t.TempDir()
			layer := filepath.Join(cfg, "speclaunch", TunedFile)
			if strings.Contains(c.name, "--policy") {
				layer = filepath.Join(t.TempDir(), "mine.toml")
			}
			if err := os.MkdirAll(filepath.Dir(layer), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, layer, c.text)
			args := slices.Clone(c.args)
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "LAYER", layer)
			}
			code, o, e := withEnv(map[string]string{"XDG_CONFIG_HOME": cfg}).cli(args...)
			got := strings.Join(strings.Fields(o+e), " ")
			if want := strings.ReplaceAll(c.want, "LAYER", layer); code != c.code || !strings.Contains(got, want) {
				t.Errorf("exit %d, want %d and %q:\n%s%s", code, c.code, want, o, e)
			}
			// once: on stdout with the resolution, or on stderr; serve
			// --dry-run says its notices in both
			if n, m := strings.Count(o, "is empty (nothing but"), strings.Count(e, "is empty (nothing but"); c.code == 0 && (n > 1 || m > 1 || n+m == 0) {
				t.Errorf("the empty layer said %d times on stdout, %d on stderr; want once on either:\n%s%s", n, m, o, e)
			}
		})
	}
}

// policy explain says an empty tuned layer as resolve does, in its notes
// (writeNotes, from emptyTuned): its layers line leaves the file out, and
// it said nothing of why the tuned schedule was gone.
func TestExplainSaysAnEmptyTunedLayer(t *testing.T) {
	t.Parallel() // its tuned layers are its own (withEnv)
	const prof = "../../profiles/demo-load.toml"
	for _, c := range []struct {
		name, layer string
		none        bool // no file
		want        int  // notes naming the layer empty
	}{
		{"no layer", "", true, 0},
		{"0 bytes", "", false, 1},
		{"comments", "# emptied\n", false, 1},
		{"a layer with its schema", "schema = 1\n", false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := t.TempDir()
			layer := filepath.Join(cfg, "speclaunch", TunedFile)
			if !c.none {
				if err := os.MkdirAll(filepath.Dir(layer), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, layer, c.layer)
			}
			code, o, e := withEnv(map[string]string{"XDG_CONFIG_HOME": cfg}).cli("policy", "explain", "--profile", prof)
			empty := "\nnotes:\n  warn: the tuned layer " + layer + " is empty (nothing but whitespace and comments)"
			if n := strings.Count(o, empty); code != 0 || n != c.want || strings.Contains(e, "is empty") {
				t.Errorf("exit %d, the empty layer said %d times in explain's notes (stdout), want %d:\n%s%s", code, n, c.want, o, e)
			}
		})
	}
}

// checkRefused: exit 2 with each of want in stderr (its lines joined: the
// error is wrapped to the screen).
func checkRefused(t *testing.T, what string, code int, stderr string, want []string) {
	t.Helper()
	stderr = strings.Join(strings.Fields(stderr), " ")
	for _, w := range want {
		if code != 2 || !strings.Contains(stderr, w) {
			t.Errorf("%s: exit %d (want 2), want %q in\n%s", what, code, w, stderr)
		}
	}
}

// The tuned layer counts as one of the 16 distinct policy files, and the
// refusal past them names it by its path: 16 --policy files beside a layer
// tune wrote were refused with no word of it.
func TestTunedLayerCountsTowardPolicyFiles(t *testing.T) {
	t.Parallel() // its tuned layer is its own (withEnv)
	const prof = "../../profiles/demo-load.toml"
	dir := t.TempDir()
	var args []string
	for i := range 16 {
		p := filepath.Join(dir, fmt.Sprintf("p%d.toml", i))
		writeFile(t, p, "schema = 1\n")
		args = append(args, "--policy", p)
	}
	for _, tc := range []struct {
		name  string
		tuned bool
		code  int
		want  string
	}{
		{"no tuned layer: 16 files", false, 0, ""},
		{"a tuned layer and 16 files", true, 2, "more than 16 distinct policy files are layered (policy.files, MLXCEL_POLICY and --policy count, each file once, and so does the tuned layer %s (written by speclaunch tune))"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := t.TempDir()
			layer := filepath.Join(cfg, "speclaunch", TunedFile)
			if tc.tuned {
				if err := os.MkdirAll(filepath.Dir(layer), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, layer, "schema = 1\n")
			}
			code, _, e := withEnv(map[string]string{"XDG_CONFIG_HOME": cfg}).cli(append([]string{"resolve", "--profile", prof}, args...)...)
			e = strings.ReplaceAll(e, "\n  ", " ") // unwrapped
			if code != tc.code || tc.want != "" && !strings.Contains(e, fmt.Sprintf(tc.want, layer)) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d saying %q", code, e, tc.code, fmt.Sprintf(tc.want, layer))
			}
		})
	}
}

// serve says on every reload what the files say of themselves, from the
// notice the start logs (emptyTuned): a layer emptied under a running
// serve changed the width and said nothing of the file. The settings'
// other notices (a misspelt variable) were said once, at start.
func TestServeLoadSaysAnEmptyTunedLayer(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg")
	tuned := filepath.Join(cfg, "speclaunch", TunedFile)
	prof := filepath.Join(dir, "p.toml")
	writeFile(t, prof, "[engine]\nname = \"sim\"\n")
	getenv := func(k string) string {
		return map[string]string{"XDG_CONFIG_HOME": cfg, "MLXCEL_PROT": "1"}[k]
	}
	for _, c := range []struct {
		name, layer string
		none        bool // no file
		want        int  // lines naming the layer empty
	}{
		{"no layer", "", true, 0},
		{"0 bytes", "", false, 1},
		{"comments", "# emptied\n", false, 1},
		{"a byte-order mark and blank lines", "\ufeff\n\n", false, 1},
		{"a layer with its schema", "schema = 1\n", false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.RemoveAll(cfg)
			if !c.none {
				if err := os.MkdirAll(filepath.Dir(tuned), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, tuned, c.layer)
			}
			e := &Env{Getenv: getenv, PolicyTOML: policyTOML, Ctx: context.Background()}
			in := config.Input{Flags: map[string]string{"profile": prof}, Getenv: getenv, EnvNames: []string{"MLXCEL_PROT"}}
			ld, err := serveLoader{e, in}.Load()
			if err != nil {
				t.Fatal(err)
			}
			var start, reload bytes.Buffer
			logNotices(newLogger(&start, nil, "json", "info", getenv), ld.(serveLoad).l.Notices)
			ld.LogNotices(newLogger(&reload, nil, "json", "info", getenv)) // JSON: a line unwrapped
			empty := "the tuned layer " + tuned + " is empty (nothing but whitespace and comments)"
			if n, m := strings.Count(start.String(), empty), strings.Count(reload.String(), empty); n != c.want || m != c.want {
				t.Errorf("said %d times at start, %d on a reload; want %d each:\nstart:\n%s\nreload:\n%s", n, m, c.want, start.String(), reload.String())
			}
			if !strings.Contains(start.String(), "MLXCEL_PROT is set") || strings.Contains(reload.String(), "MLXCEL_PROT") {
				t.Errorf("the misspelt variable is not said at start alone:\nstart:\n%s\nreload:\n%s", start.String(), reload.String())
			}
		})
	}
}
