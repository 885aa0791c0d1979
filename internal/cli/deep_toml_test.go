package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/safefile"
)

// deepTOML are the shapes of issue 20 that overflowed the decoder's stack
// or took gigabytes, and 500,000 nested arrays, which fit a profile's
// 1 MiB cap; each goes past the guard's depth on line 3 of its file.
var deepTOML = []struct{ shape, body string }{
	{"2,000,000 nested arrays", "a = " + strings.Repeat("[", 2_000_000) + strings.Repeat("]", 2_000_000)},
	{"500,000 nested arrays", "a = " + strings.Repeat("[", 500_000) + strings.Repeat("]", 500_000)},
	{"20,000 nested inline tables", "a = " + strings.Repeat("{b = ", 20_000) + "1" + strings.Repeat("}", 20_000)},
	{"5,000 nested inline tables", "a = " + strings.Repeat("{b = ", 5_000) + "1" + strings.Repeat("}", 5_000)},
}

// deepWant is the refusal of a deep file at path: its nesting, or its size
// where it is over the cap for what it is read as.
func deepWant(path, text string, limit int64) string {
	if int64(len(text)) > limit {
		return path + ": file is larger than"
	}
	return path + ":3: nested more than"
}

// TestDeepTOMLExit2: a deeply nested profile or policy file is bad input
// at once, exit 2, with its file and line, from every command that reads it.
func TestDeepTOMLExit2(t *testing.T) {
	dir := t.TempDir()
	for _, d := range deepTOML {
		path := filepath.Join(dir, strings.NewReplacer(",", "", " ", "-").Replace(d.shape)+".toml")
		text := "# a file that nests too deep\n\n" + d.body + "\n"
		writeFile(t, path, text)
		for _, tc := range []struct {
			args  []string
			limit int64
		}{
			{[]string{"profile", "validate", "--profile", path}, safefile.ProfileLimit},
			{[]string{"resolve", "--profile", path}, safefile.ProfileLimit},
			{[]string{"resolve", "--policy", path}, safefile.PolicyLimit},
			{[]string{"policy", "list", "--policy", path}, safefile.PolicyLimit},
		} {
			t.Run(d.shape+"/"+strings.Join(tc.args[:len(tc.args)-1], " "), func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				code := MainContext(context.Background(), tc.args, policyTOML, &stdout, &stderr, nil)
				if code != 2 {
					t.Errorf("exit %d, want 2; stderr %s", code, stderr.String())
				}
				if want := deepWant(path, text, tc.limit); !strings.Contains(stderr.String(), want) {
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
	for _, f := range []struct {
		path  string
		limit int64
	}{{prof, safefile.ProfileLimit}, {pol, safefile.PolicyLimit}} {
		for _, d := range deepTOML {
			t.Run(filepath.Base(f.path)+"/"+d.shape, func(t *testing.T) {
				writeFile(t, prof, "[engine]\nname = \"sim\"\n")
				writeFile(t, pol, "schema = 1\n")
				writeFile(t, f.path, "\n\n"+d.body)
				_, err := e.load(in)
				if want := deepWant(f.path, "\n\n"+d.body, f.limit); err == nil || !isBadInput(err) || !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want bad input with %q", err, want)
				}
			})
		}
	}
}

// A file that is not text given as a profile, a policy file or the tuned
// layer is refused as not UTF-8 text at the line of its first bad byte,
// whatever its size: one of some hundred KiB was refused as nested more
// than 16 levels deep, at a line of its binary (a small one was said to
// be invalid UTF-8, by the decoder).
func TestBinaryFileIsNotText(t *testing.T) {
	t.Parallel() // its tuned layers are its own (withEnv)
	// 900 KB of bytes as a program or random data holds them: brackets that
	// nest past the guard's depth (line 3), and a byte that is not UTF-8
	// (line 1) before them.
	binary := "\x7fELF\x02\x01\x01\xf7\n\n" + "a = " + strings.Repeat("[", 20) + "\x00\xff" + strings.Repeat("\xf7[{\x00", 225_000)
	small := "\x7fELF\xf7\x02\x01\x01\n"
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
	}{
		{"900 KB", binary},
		{"small", small},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "")+".toml")
		writeFile(t, path, tc.text)
		cfg := t.TempDir()
		layer := filepath.Join(cfg, "speclaunch", TunedFile)
		if err := os.MkdirAll(filepath.Dir(layer), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, layer, tc.text)
		for _, k := range []struct {
			kind string
			args []string
			file string
		}{
			{"profile", []string{"resolve", "--profile", path}, path},
			{"policy file", []string{"resolve", "--engine", "sim", "-m", "t", "--policy", path}, path},
			{"tuned layer", []string{"resolve", "--engine", "sim", "-m", "t"}, layer},
		} {
			t.Run(tc.name+"/"+k.kind, func(t *testing.T) {
				env := map[string]string{"XDG_CONFIG_HOME": t.TempDir()}
				if k.file == layer {
					env["XDG_CONFIG_HOME"] = cfg
				}
				code, o, e := withEnv(env).cli(k.args...)
				if want := k.file + ":1: an invalid UTF-8 byte (0x"; code != 2 || !strings.Contains(unwrap(e), want) || !strings.Contains(unwrap(e), "not a text file") {
					t.Errorf("exit %d, want 2 and %q, not a text file:\n%s%s", code, want, o, e)
				}
			})
		}
	}
}
