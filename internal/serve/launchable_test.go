package serve

import (
	"errors"
	"github.com/speclaunch/speclaunch/internal/checkpoint"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/exitcode"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/safefile/safefiletest"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

// A model path that is a FIFO, socket or device is refused before the
// engine starts (it would block on it or read it without end), and so is a
// directory given to llama-server, which loads a .gguf file.
func TestCheckModelPath(t *testing.T) {
	shapes := safefiletest.Make(t, "m.gguf", 1)
	dir := t.TempDir()
	regular := filepath.Join(dir, "ok.gguf")
	if err := os.WriteFile(regular, checkpoint.HeaderOnlyGGUF(), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(name, to string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(to, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shard := write("m-00001-of-00002.gguf", checkpoint.HeaderOnlyGGUF(), 0o644)
	cut := write("cut.gguf", checkpoint.HeaderOnlyGGUF()[:20], 0o644)
	impossible := write("impossible.gguf", append(checkpoint.HeaderOnlyGGUF()[:16], 0xff, 0xff, 0, 0, 0, 0, 0, 0), 0o644)
	notGGUF := write("st.gguf", []byte("{\"__metadata__\": {}}"), 0o644)
	short := write("short.gguf", []byte("GG"), 0o644)
	unreadable := write("secret.gguf", []byte("GGUF"), 0)
	cases := []struct {
		name   string
		engine key.Engine
		path   string
		want   string // "" = accepted
	}{
		{"regular file", key.LlamaCpp, regular, ""},
		{"first shard of a split", key.LlamaCpp, shard, ""},
		{"sparse file mlxcel", key.MLXCEL, shapes[safefiletest.Huge], ""},
		{"sparse file llama", key.LlamaCpp, shapes[safefiletest.Huge], `is not a GGUF file (it starts with "\x00", not "GGUF")`},
		{"empty llama", key.LlamaCpp, shapes[safefiletest.Empty], "is empty: llama-server loads a GGUF model file"},
		{"empty sim stand-in", key.Sim, shapes[safefiletest.Empty], ""},
		{"not gguf", key.LlamaCpp, notGGUF, `is not a GGUF file (it starts with "{\"__", not "GGUF")`},
		{"not gguf mlxcel", key.MLXCEL, notGGUF, ""},
		{"shorter than the magic", key.LlamaCpp, short, `it starts with "GG"`},
		{"cut short", key.LlamaCpp, cut, "is not a whole GGUF file (gguf: truncated reading kv count at byte 16): a copy or download cut short"},
		{"counts the size cannot hold", key.LlamaCpp, impossible, "is not a whole GGUF file (gguf: kv count 65535 is impossible for the 0 bytes after the 24-byte header at byte 16)"},
		{"mlx directory", key.MLXCEL, dir, ""},
		{"llama directory", key.LlamaCpp, dir, "is a directory: llama-server loads a .gguf file"},
		{"fifo", key.LlamaCpp, shapes[safefiletest.FIFO], "is a FIFO (named pipe), not a model file"},
		{"fifo mlxcel", key.MLXCEL, shapes[safefiletest.FIFO], "is a FIFO (named pipe), not a model file"},
		{"socket", key.MLXCEL, shapes[safefiletest.Socket], "is a socket, not a model file"},
		{"device", key.LlamaCpp, shapes[safefiletest.Device], "is a device, not a model file"},
		{"missing", key.LlamaCpp, shapes[safefiletest.Missing], "no such file"},
		{"a repo id vLLM fetches", key.VLLM, "Qwen/Qwen3-8B", ""},
		{"dangling symlink", key.LlamaCpp, link("dangling.gguf", filepath.Join(dir, "gone.gguf")), "is a symlink to " + filepath.Join(dir, "gone.gguf") + ", which leads nowhere (no such file or directory): remove it"},
		{"symlink loop", key.LlamaCpp, link("loop.gguf", "loop.gguf"), "is a symlink to loop.gguf, which leads nowhere (too many levels of symbolic links): remove it"},
	}
	if os.Geteuid() != 0 { // root reads a mode-000 file
		cases = append(cases, struct {
			name   string
			engine key.Engine
			path   string
			want   string
		}{"unreadable", key.LlamaCpp, unreadable, "is not readable by this user: permission denied; make it readable"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkModelPath(c.engine, "target model", c.path, "flag --model")
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "(flag --model)") || !errors.As(err, new(*exitcode.BadInput)) {
				t.Fatalf("err = %v, want bad input naming the source and %q", err, c.want)
			}
		})
	}
}

// The sim's model files are checked as every engine's are, the target
// and the drafter: a path that is not there is refused before anything
// starts or stops (a reload of a demo-load copy naming nope.txt was
// applied, the sim run on it). A stand-in name (plan.SimName) needs no
// file.
func TestLaunchableChecksTheSimsModels(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.toml")
	there := filepath.Join(dir, "demo-load", "target.txt")
	if err := os.MkdirAll(filepath.Dir(there), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(there, []byte("stand-in"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "demo-load", "nope.txt")
	src := config.Source{Origin: config.Profile, Name: prof + ":7"}
	for _, tc := range []struct {
		name          string
		target, draft string
		want          string // "" = accepted
	}{
		{"files that are there", there, there, ""},
		{"stand-in names beside the profile", filepath.Join(dir, "demo-target"), filepath.Join(dir, "demo-drafter"), ""},
		{"a missing target", missing, there, "target model " + missing + " (profile " + prof + ":7): no such file"},
		{"a missing drafter", there, missing, "draft model " + missing + " (profile " + prof + ":7): no such file"},
		// A reload of a profile emptied of its model said "set model.path in
		// the profile", naming no file (a hostile-client campaign).
		{"no target at all", "", there, "no target model: set model.path in " + prof + ", --model/-m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &plan.Plan{}
			s := &p.Settings
			s.Engine.Value, s.ProfilePath = key.Sim, prof
			s.Model = config.Field[string]{Value: tc.target, Src: src}
			s.DraftModel = config.Field[string]{Value: tc.draft, Src: src}
			err := Launchable(p, false)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(tc.want, ": stat") && !errors.Is(err, fs.ErrNotExist) || !errors.As(err, new(*exitcode.BadInput)) {
				t.Fatalf("err = %v, want bad input holding %q", err, tc.want)
			}
		})
	}
}

// An engine binary that cannot be run is refused naming where it was set
// (variable, flag or profile file:line), the sim's as llama.cpp's, and
// where it was looked for; one not set says every place to set it.
func TestRunnableSaysWhereTheBinaryWasSet(t *testing.T) {
	env := config.Source{Origin: config.Env, Name: "MLXCEL_ENGINE_BINARY"}
	flag := config.Source{Origin: config.Flag, Name: "--engine-binary"}
	prof := config.Source{Origin: config.Profile, Name: "p.toml:3"}
	for _, tc := range []struct {
		name   string
		engine key.Engine
		bin    string
		src    config.Source // Default = not set
		want   string
	}{
		{"sim, a path in the variable", key.Sim, "/nonexistent/x", env, `engine binary "/nonexistent/x" not found (env MLXCEL_ENGINE_BINARY): no executable file at that path; the sim engine runs a speclaunch binary: fix the path, or unset it to run this speclaunch`},
		{"sim, a path in the flag", key.Sim, "/nonexistent/x", flag, `not found (flag --engine-binary): no executable file at that path`},
		{"sim, a name in the profile", key.Sim, "no-such-speclaunch", prof, `engine binary "no-such-speclaunch" not found (profile p.toml:3): looked up on PATH; the sim engine runs`},
		{"sim, not set", key.Sim, "/nonexistent/self", config.Source{}, `engine binary /nonexistent/self cannot be run (stat /nonexistent/self: no such file or directory); install it or set engine.binary in the profile (--engine-binary, MLXCEL_ENGINE_BINARY)`},
		{"llama.cpp, a path in the variable", key.LlamaCpp, "/nonexistent/x", env, `engine binary "/nonexistent/x" not found (env MLXCEL_ENGINE_BINARY): no executable file at that path; install llama.cpp there or fix the path`},
		{"llama.cpp, a name in the profile", key.LlamaCpp, "no-such-llama-server", prof, `not found (profile p.toml:3): looked up on PATH; install llama.cpp or give its path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &plan.Plan{}
			s := &p.Settings
			s.Engine.Value = tc.engine
			if tc.src.Origin != config.Default {
				s.EngineBinary = config.Field[string]{Value: tc.bin, Src: tc.src}
			}
			p.Facts.Binary = tc.bin
			p.Launch.Argv = []string{tc.bin, "__sim"}
			err := Runnable(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, new(*exitcode.BadInput)) {
				t.Fatalf("err = %v, want bad input holding %q", err, tc.want)
			}
		})
	}
}

// A FIFO put in place of a checked model file between the caller's Stat
// and the magic's read is refused, not waited on for a writer (the open
// blocked serve, a reload or profile validate for ever).
func TestGGUFMagicReadRefusesAFIFO(t *testing.T) {
	fifo := safefiletest.Make(t, "m.gguf", 1)[safefiletest.FIFO]
	var err error
	testenv.Returns(t, "the magic's read of a FIFO", func() { err = ggufProblem("target model", fifo, "flag --model", 100) })
	if err == nil || !strings.Contains(err.Error(), "FIFO") {
		t.Errorf("err = %v, want the FIFO refused", err)
	}
}

// A model path that holds a newline is said quoted in the refusal, one
// line with the fix; a missing one says the fix, not only stat's words.
func TestModelPathRefusalsAreOneLine(t *testing.T) {
	dir := t.TempDir()
	odd := filepath.Join(dir, "bad\nname.gguf")
	if err := os.WriteFile(odd, []byte("FAKE"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{odd, `bad\nname.gguf" (flag --model) is not a GGUF file`},
		{filepath.Join(dir, "nope.gguf"), "(flag --model): no such file: check the path"},
		{filepath.Join(dir, "no\nsuch\x1b[2J.gguf"), `no\nsuch\x1b[2J.gguf" (flag --model): no such file`},
	} {
		err := checkModelPath(key.LlamaCpp, "target model", tc.path, "flag --model")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.ContainsAny(err.Error(), "\n\x1b") {
			t.Errorf("%q: %v, want one line with %q", tc.path, err, tc.want)
		}
	}
}

// serve says every problem of this host in one error, as profile validate
// does: it said the first, and fixing it showed the next.
func TestRunnableSaysEveryProblem(t *testing.T) {
	p := &plan.Plan{}
	s := &p.Settings
	s.Engine.Value = key.LlamaCpp
	prof := func(line string) config.Source { return config.Source{Origin: config.Profile, Name: "p.toml:" + line} }
	s.EngineBinary = config.Field[string]{Value: "/nonexistent/llama-server", Src: prof("3")}
	s.Model = config.Field[string]{Value: "/nonexistent/t.gguf", Src: prof("5")}
	s.DraftModel = config.Field[string]{Value: "/nonexistent/d.gguf", Src: prof("7")}
	p.Facts.Binary = s.EngineBinary.Value
	err := Runnable(p)
	for _, want := range []string{"3 problems on this host: (1) engine binary", "(2) target model /nonexistent/t.gguf (profile p.toml:5)", "(3) draft model /nonexistent/d.gguf (profile p.toml:7)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to hold %q", err, want)
		}
	}
	if !errors.As(err, new(*exitcode.BadInput)) {
		t.Errorf("err = %v, want bad input (exit 2)", err)
	}
}
