package engine

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/fakellama"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

// TestMain turns the test binary into a fake llama-server when re-executed
// with FAKELLAMA_MAIN=1.
func TestMain(m *testing.M) {
	if os.Getenv("FAKELLAMA_MAIN") == "1" {
		os.Exit(fakellama.Main(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func mustEngine(s string) key.Engine {
	e, err := key.ParseEngine(s)
	if err != nil {
		panic(err)
	}
	return e
}

// fakeBinary puts the test binary in a temp dir as `llama-server`.
func fakeBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "llama-server")
	if err := os.Symlink(self, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func freePort(t *testing.T) int {
	t.Helper()
	return testenv.Port(t)
}

func TestDetectLlama(t *testing.T) {
	t.Setenv("FAKELLAMA_MAIN", "1")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	// A stale variable must not break detection: a 2026 llama-server stops on it even for --help.
	t.Setenv("LLAMA_ARG_DRAFT_MAX", "4")
	for _, tt := range []struct {
		tree    string
		sp      Spelling
		version string
		commit  string
	}{
		{"new", Spelling2026, "9749 (d32676d)", "d32676d"},
		{"old", SpellingLegacy, "8306 (b1a190e)", "b1a190e"},
	} {
		t.Run(tt.tree, func(t *testing.T) {
			t.Setenv("FAKELLAMA_TREE", tt.tree)
			bin := fakeBinary(t)
			c, err := DetectLlama(context.Background(), bin)
			if err != nil {
				t.Fatal(err)
			}
			if c.Spelling != tt.sp || c.Version != tt.version || c.Commit != tt.commit {
				t.Fatalf("%+v", c)
			}
			// Cached in memory and on disk: a changed tree is not re-run for the same (path, mtime).
			t.Setenv("FAKELLAMA_TREE", map[string]string{"new": "old", "old": "new"}[tt.tree])
			if c2, err := DetectLlama(context.Background(), bin); err != nil || c2 != c {
				t.Fatalf("cached: %+v %v", c2, err)
			}
			capsMu.Lock()
			clear(capsMem)
			capsMu.Unlock()
			if c3, err := DetectLlama(context.Background(), bin); err != nil || c3 != c {
				t.Fatalf("from file cache: %+v %v", c3, err)
			}
			b, err := os.ReadFile(filepath.Join(os.Getenv("XDG_CACHE_HOME"), "speclaunch", "llama-caps.json"))
			if err != nil || !bytes.Contains(b, []byte(tt.commit)) {
				t.Fatalf("cache file: %s %v", b, err)
			}
		})
	}
	if _, err := DetectLlama(context.Background(), filepath.Join(t.TempDir(), "nope")); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("missing binary: %v", err)
	}
}

type child struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan error
}

func startChild(t *testing.T, argv, env []string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(argv[0], argv[1:]...), stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	c.cmd.Env = env
	c.cmd.Stderr = c.stderr // read only after the process exits
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			_ = c.cmd.Process.Kill()
		}
	})
	return c
}

func waitHealthy(t *testing.T, c *child, base string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-c.done:
			t.Fatalf("engine exited: %v", err)
		default:
		}
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("engine never became healthy")
}

// End to end: detect the fake's spelling, build the command with the
// adapter, start it with the launcher's environment, verify the width.
func TestVerifyLlamaAgainstFake(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("FAKELLAMA_MAIN", "1")
	for _, tt := range []struct {
		tree  string
		width int
	}{
		{"new", 4}, {"new", 2}, {"new", 9}, {"old", 4}, {"old", 7},
	} {
		t.Run(tt.tree+"-"+string(rune('0'+tt.width)), func(t *testing.T) {
			t.Setenv("FAKELLAMA_TREE", tt.tree)
			bin := fakeBinary(t)
			caps, err := DetectLlama(context.Background(), bin)
			if err != nil {
				t.Fatal(err)
			}
			s := settings(key.LlamaCpp, "draft.gguf")
			s.Model = "target.gguf"
			s.Binary = bin
			s.Port = freePort(t)
			// The operator's stale variable would stop a 2026 server; the adapter keeps it out.
			environ := append(os.Environ(), "LLAMA_ARG_DRAFT_MAX=6")
			a, _ := For(key.LlamaCpp)
			l, err := a.Command(s, res(tt.width), key.Draft, environ, caps)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(l.EnvRemoved, "LLAMA_ARG_DRAFT_MAX") {
				t.Fatalf("LLAMA_ARG_DRAFT_MAX not removed: %v", l.EnvRemoved)
			}
			c := startChild(t, l.Argv, l.Env)
			waitHealthy(t, c, l.BaseURL)
			o, err := VerifyLlama(context.Background(), l.BaseURL, caps.Spelling, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !o.Speculative || o.Width != tt.width {
				t.Fatalf("observation %+v, want width %d", o, tt.width)
			}
			// Unknown spelling tries /metrics then /slots and gets the same answer.
			o2, err := VerifyLlama(context.Background(), l.BaseURL, SpellingUnknown, nil)
			if err != nil || o2.Width != tt.width {
				t.Fatalf("unknown spelling: %+v %v", o2, err)
			}
		})
	}
}

func TestVerifyLlamaNotLive(t *testing.T) {
	t.Setenv("FAKELLAMA_MAIN", "1")
	t.Setenv("FAKELLAMA_TREE", "new")
	bin := fakeBinary(t)
	port := freePort(t)
	base := "http://127.0.0.1:" + itoa(port)
	// What an operator gets from `-md` alone on a 2026 tree: loaded, drafting nothing.
	c := startChild(t, []string{bin, "-m", "target.gguf", "-md", "draft.gguf", "--host", "127.0.0.1", "--port", itoa(port), "--metrics"}, os.Environ())
	waitHealthy(t, c, base)
	o, err := VerifyLlama(context.Background(), base, Spelling2026, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.Speculative || o.Width != 0 || !strings.Contains(o.Line, "not live") || !strings.Contains(o.Line, "--spec-type") {
		t.Fatalf("%+v", o)
	}
}

func TestVerifyLlamaErrors(t *testing.T) {
	t.Setenv("FAKELLAMA_MAIN", "1")
	t.Setenv("FAKELLAMA_TREE", "new")
	bin := fakeBinary(t)
	port := freePort(t)
	base := "http://127.0.0.1:" + itoa(port)
	// Drafting but without --metrics: the 2026 probe cannot read the width.
	c := startChild(t, []string{bin, "-m", "t.gguf", "-md", "d.gguf", "--spec-type", "draft-simple", "--host", "127.0.0.1", "--port", itoa(port)}, os.Environ())
	waitHealthy(t, c, base)
	_, err := VerifyLlama(context.Background(), base, Spelling2026, nil)
	if err == nil || !strings.Contains(err.Error(), "--metrics") {
		t.Fatalf("want a --metrics error, got %v", err)
	}
	_, err = VerifyLlama(context.Background(), "http://127.0.0.1:"+itoa(freePort(t)), Spelling2026, nil)
	if err == nil || !strings.Contains(err.Error(), "ready") {
		t.Fatalf("no server: %v", err)
	}
}

// The stale variable really does stop a 2026 server (the reason the adapter removes it).
func TestStaleEnvStopsNewTree(t *testing.T) {
	t.Setenv("FAKELLAMA_MAIN", "1")
	t.Setenv("FAKELLAMA_TREE", "new")
	bin := fakeBinary(t)
	cmd := exec.Command(bin, "-m", "t.gguf", "--port", itoa(freePort(t)))
	cmd.Env = append(os.Environ(), "LLAMA_ARG_DRAFT_MAX=4")
	out, err := cmd.CombinedOutput()
	if err == nil || !bytes.Equal(out, readGolden(t, "new-env-draft-max.txt")) {
		t.Fatalf("err %v, out %q", err, out)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
