package cli

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/testenv"
)

// The sim engine is this test binary re-executed with "__sim".
//
// The end-to-end tests (testenv.E2E) call t.Parallel, so they run together
// once the serial tests are done; no test judges the sim's speed. Two kinds
// stay serial: a test that signals the test process itself (SIGHUP,
// SIGTERM), since every in-process serve hears it, and one that sets the
// environment (t.Setenv); a test that needs a variable of its own reads
// it through runEnv's getenv instead where it can (TestTuneOnSim).
//
// They wait on engines and real time more than on the CPU: a -race run of
// this package at the default -parallel (GOMAXPROCS: 2 on the 2-core CI
// machine) kept the cores about 15 % busy (95 s of CPU in 330 s), so 3
// run at once unless -parallel is given. At 4, the adaptive loop of
// TestAdaptEvalReportsTheChosenWidth once did not settle in its 90 s
// (the sim's timings too noisy under -race while the machine was shared).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == simCommand {
		os.Exit(runSim(os.Args[2:], os.Stdout, os.Stderr))
	}
	// No test reads the tuned layer or the adaptive state of the machine
	// it runs on: one that wants a tuned layer sets XDG_CONFIG_HOME
	// itself; the adaptive state is kept per model file (its path is in
	// the key), so tests share the cache directory without meeting.
	var dirs []string
	for _, v := range []string{"XDG_CONFIG_HOME", "XDG_CACHE_HOME"} {
		d, err := os.MkdirTemp("", "speclaunch-cli-test-"+strings.ToLower(v)+"-")
		if err != nil {
			panic(err)
		}
		os.Setenv(v, d)
		dirs = append(dirs, d)
	}
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && runtime.GOMAXPROCS(0) < e2eParallel {
		flag.Set("test.parallel", strconv.Itoa(e2eParallel))
	}
	code := m.Run()
	for _, d := range dirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// e2eParallel is how many tests run at once by default (see TestMain).
const e2eParallel = 3

var policyTOML = func() []byte {
	b, err := os.ReadFile("../../policy.toml")
	if err != nil {
		panic(err)
	}
	return b
}()

// syncBuffer is a goroutine-safe log sink the test can poll.
type syncBuffer struct{ testenv.Buffer }

// waitFor polls the log until re matches n times.
func (b *syncBuffer) waitFor(t *testing.T, re string, n int, timeout time.Duration) {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if len(rx.FindAllStringIndex(b.String(), -1)) >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %d× %q in log:\n%s", n, re, b.String())
}

func (b *syncBuffer) count(re string) int {
	return len(regexp.MustCompile(re).FindAllStringIndex(b.String(), -1))
}

func freePort(t *testing.T) int {
	t.Helper()
	return testenv.Port(t)
}

// serveRun starts `speclaunch serve` in-process; stop() cancels it and
// returns the exit code.
type serveRun struct {
	log  *syncBuffer
	code chan int
	stop context.CancelFunc
}

func startServe(t *testing.T, args ...string) *serveRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &serveRun{log: &syncBuffer{}, code: make(chan int, 1), stop: cancel}
	go func() {
		r.code <- MainContext(ctx, append([]string{"serve", "--log-format", "text"}, args...), policyTOML, r.log, r.log, nil)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.code:
		case <-time.After(15 * time.Second):
			t.Errorf("serve did not stop")
		}
	})
	return r
}

func (r *serveRun) exit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case c := <-r.code:
		r.code <- c
		return c
	case <-time.After(timeout):
		t.Fatalf("serve still running; log:\n%s", r.log.String())
	}
	return -1
}

func simProfile(port int, extra string) string {
	return fmt.Sprintf(`[engine]
name = "sim"
args = ["--sim-warmup", "100ms"%s]
[model]
path = "target"
quant = "affine"
[draft]
model = "drafter"
kind = "dflash"
[server]
port = %d
[gpu]
capability = "12.1"
[serve]
stop_timeout = "5s"
`, extra, port)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// renameOver saves the way editors do: write a temp file, rename it over.
func renameOver(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func health(port int) int {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", port))
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func pids(log string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`ready url=\S+ after=\S+ pid=(\d+)`).FindAllStringSubmatch(log, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestServeReload(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	dir := t.TempDir()
	port := freePort(t)
	prof := filepath.Join(dir, "p.toml")
	base := simProfile(port, "")
	writeFile(t, prof, base)
	r := startServe(t, "--profile", prof)
	r.log.waitFor(t, `width verified width=4`, 1, 20*time.Second)

	// An unchanged rewrite restarts nothing, nor does an edit of
	// whitespace only (same command). The watcher says nothing of a
	// rewrite of the same bytes, so the whitespace edit after it is the
	// marker: its reload counts as applied once the runtime has answered
	// it (taken in, or switched to), and the watcher reads events in
	// order, so the unchanged rewrite was handled before or with it.
	renameOver(t, prof, base)
	renameOver(t, prof, base+"\n")
	waitReloadsApplied(t, port, 1)
	if n := r.log.count(`switching engines|engine command changed`); n != 0 {
		t.Fatalf("an unchanged rewrite or a whitespace edit restarted the engine:\n%s", r.log)
	}

	// An edit that changes the width restarts the engine at the new width.
	renameOver(t, prof, strings.Replace(base, `kind = "dflash"`, "kind = \"dflash\"\nblock_size = 3", 1))
	r.log.waitFor(t, `width verified width=3`, 1, 20*time.Second)
	if !strings.Contains(r.log.String(), "switching engines") {
		t.Errorf("no restart line:\n%s", r.log)
	}
	if len(pids(r.log.String())) != 2 {
		t.Errorf("want two engine starts, log:\n%s", r.log)
	}

	// A broken edit is rejected with file:line and the engine keeps serving.
	writeFile(t, prof, strings.Replace(base, "[draft]", "[draft\n", 1))
	r.log.waitFor(t, `reload rejected`, 1, 10*time.Second)
	if !strings.Contains(r.log.String(), "p.toml:") {
		t.Errorf("rejection does not name file:line:\n%s", r.log)
	}
	// Width 1: rejected too.
	writeFile(t, prof, strings.Replace(base, `kind = "dflash"`, "kind = \"dflash\"\nblock_size = 1", 1))
	r.log.waitFor(t, `reload rejected`, 2, 10*time.Second)
	if health(port) != 200 {
		t.Fatal("engine stopped serving after a bad edit")
	}
	// A key in another case: rejected too, naming its line and the key's
	// spelling (the decoder applied it: BLOCK_SIZE = 3 switched to width 3).
	writeFile(t, prof, strings.Replace(base, `kind = "dflash"`, "kind = \"dflash\"\nBLOCK_SIZE = 3", 1))
	r.log.waitFor(t, `reload rejected`, 3, 10*time.Second)
	if !strings.Contains(r.log.String(), `p.toml:10: unknown key "draft.BLOCK_SIZE"; did you mean "draft.block_size"?`) {
		t.Errorf("the rejection does not name the line and the key's spelling:\n%s", r.log)
	}
	if health(port) != 200 {
		t.Fatal("engine stopped serving after a bad edit")
	}
	if n := len(pids(r.log.String())); n != 2 {
		t.Errorf("a bad edit restarted the engine (%d starts)", n)
	}

	// SIGHUP-free explicit reload is covered by watch's tests; here a valid
	// edit after the bad ones still applies.
	renameOver(t, prof, strings.Replace(base, `kind = "dflash"`, "kind = \"dflash\"\nblock_size = 2", 1))
	r.log.waitFor(t, `width verified width=2`, 1, 20*time.Second)

	r.stop()
	if c := r.exit(t, 15*time.Second); c != 0 {
		t.Errorf("exit code %d", c)
	}
	if health(port) == 200 {
		t.Error("engine still up after serve stopped")
	}
}

// A Kubernetes ConfigMap swaps a ..data symlink; no event names the file.
func TestServeReloadConfigMapSwap(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	dir := t.TempDir()
	port := freePort(t)
	v1 := filepath.Join(dir, "..2026_1")
	v2 := filepath.Join(dir, "..2026_2")
	os.Mkdir(v1, 0o755)
	os.Mkdir(v2, 0o755)
	base := simProfile(port, "")
	writeFile(t, filepath.Join(v1, "p.toml"), base)
	writeFile(t, filepath.Join(v2, "p.toml"), strings.Replace(base, `kind = "dflash"`, "kind = \"dflash\"\nblock_size = 6", 1))
	os.Symlink("..2026_1", filepath.Join(dir, "..data"))
	os.Symlink("..data/p.toml", filepath.Join(dir, "p.toml"))
	r := startServe(t, "--profile", filepath.Join(dir, "p.toml"))
	r.log.waitFor(t, `width verified width=4`, 1, 20*time.Second)
	os.Symlink("..2026_2", filepath.Join(dir, "..data_tmp"))
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	r.log.waitFor(t, `width verified width=6`, 1, 20*time.Second)
}

func TestServeExitCodes(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	t.Run("engine exit code propagates", func(t *testing.T) {
		dir := t.TempDir()
		prof := filepath.Join(dir, "p.toml")
		writeFile(t, prof, simProfile(freePort(t), `, "--sim-crash-after", "300ms", "--sim-exit-code", "7"`))
		r := startServe(t, "--profile", prof)
		if c := r.exit(t, 20*time.Second); c != 7 {
			t.Errorf("exit code %d, want 7; log:\n%s", c, r.log)
		}
	})
	t.Run("restart on failure", func(t *testing.T) {
		dir := t.TempDir()
		prof := filepath.Join(dir, "p.toml")
		writeFile(t, prof, simProfile(freePort(t), `, "--sim-crash-after", "300ms", "--sim-exit-code", "7"`))
		r := startServe(t, "--profile", prof, "--restart", "on-failure")
		r.log.waitFor(t, `engine exited; restarting`, 2, 30*time.Second)
		r.log.waitFor(t, `ready url=`, 2, 30*time.Second)
	})
	t.Run("strict width stops a declining engine with 3", func(t *testing.T) {
		dir := t.TempDir()
		prof := filepath.Join(dir, "p.toml")
		writeFile(t, prof, simProfile(freePort(t), `, "--sim-decline"`))
		r := startServe(t, "--profile", prof, "--strict-width")
		if c := r.exit(t, 20*time.Second); c != exitWidthMismatch {
			t.Errorf("exit code %d, want 3; log:\n%s", c, r.log)
		}
		if !strings.Contains(r.log.String(), "declined speculation") {
			t.Errorf("no decline error:\n%s", r.log)
		}
	})
	t.Run("decline without strict keeps serving, logged at error", func(t *testing.T) {
		dir := t.TempDir()
		prof := filepath.Join(dir, "p.toml")
		port := freePort(t)
		writeFile(t, prof, simProfile(port, `, "--sim-decline"`))
		r := startServe(t, "--profile", prof)
		r.log.waitFor(t, `ERR width check failed`, 1, 20*time.Second)
		// The check comes before the engine takes traffic: /health says
		// 503 until it does (a test reading it at once failed under load).
		if st := waitStatus(t, port, 20*time.Second, func(st statusDoc) bool { return st.Engine != nil }); st.Engine == nil {
			t.Fatalf("the engine is not serving; log:\n%s", r.log)
		}
		if health(port) != 200 {
			t.Error("not serving")
		}
	})
	t.Run("engine that never becomes ready", func(t *testing.T) {
		dir := t.TempDir()
		prof := filepath.Join(dir, "p.toml")
		writeFile(t, prof, simProfile(freePort(t), `, "--sim-warmup", "30s"`))
		r := startServe(t, "--profile", prof, "--ready-timeout", "1s")
		if c := r.exit(t, 20*time.Second); c == 0 {
			t.Errorf("exit code 0 for an engine that never became ready")
		}
		if !strings.Contains(r.log.String(), "did not become ready") {
			t.Errorf("log:\n%s", r.log)
		}
	})
	t.Run("interrupt while the engine is loading stops it at once", func(t *testing.T) {
		dir := t.TempDir()
		prof := filepath.Join(dir, "p.toml")
		writeFile(t, prof, simProfile(freePort(t), `, "--sim-warmup", "60s"`))
		r := startServe(t, "--profile", prof)
		// The engine's first line: its process runs, in its 60 s load.
		r.log.waitFor(t, `engine 1 \| speclaunch sim:`, 1, 10*time.Second)
		r.stop()
		if c := r.exit(t, 10*time.Second); c != 130 {
			t.Errorf("exit code %d, want 130; log:\n%s", c, r.log)
		}
	})
	t.Run("engine that exits at once shows its last lines", func(t *testing.T) {
		dir := t.TempDir()
		prof := filepath.Join(dir, "p.toml")
		writeFile(t, prof, simProfile(freePort(t), `, "--sim-fail-start"`))
		r := startServe(t, "--profile", prof)
		if c := r.exit(t, 20*time.Second); c == 0 {
			t.Errorf("exit code 0")
		}
		if !strings.Contains(r.log.String(), "failed to start") || !strings.Contains(r.log.String(), "dispatch resolution failed") {
			t.Errorf("log:\n%s", r.log)
		}
	})
}

// reloadsApplied is speclaunch_reloads_total{outcome="applied"}: a reload
// counts once the runtime has answered it, its settings taken in without a
// switch or switched to.
func reloadsApplied(t *testing.T, port int) int {
	t.Helper()
	for _, m := range scrape(t, fmt.Sprintf("http://127.0.0.1:%d/speclaunch/metrics", port))["speclaunch_reloads_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "outcome" && l.GetValue() == "applied" {
				return int(m.GetCounter().GetValue())
			}
		}
	}
	return 0
}

// waitReloadsApplied waits until n reloads are applied (reloadsApplied).
func waitReloadsApplied(t *testing.T, port, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); reloadsApplied(t, port) < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d reloads applied after 20s, want %d", reloadsApplied(t, port), n)
		}
	}
}

// unwrap joins the lines report wraps to the screen ("\n  " continues a
// line), for a test that matches a phrase across a wrap.
func unwrap(s string) string { return strings.ReplaceAll(s, "\n  ", " ") }
