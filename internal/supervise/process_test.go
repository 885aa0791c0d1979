//go:build linux

package supervise

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the fake engine: with SUPERVISE_FAKE set it
// behaves as the named mode instead of running tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv("SUPERVISE_FAKE"); mode != "" {
		fakeEngine(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func fakeEngine(mode string) {
	switch mode {
	case "lines":
		fmt.Println("out 1")
		fmt.Fprintln(os.Stderr, "err 1")
		fmt.Println("out 2")
		code, _ := strconv.Atoi(os.Getenv("SUPERVISE_CODE"))
		os.Exit(code)
	case "partial":
		os.Stdout.WriteString("a\r\nno newline")
	case "longline":
		os.Stdout.WriteString(strings.Repeat("x", 150000) + "\nshort\n")
	case "sleep":
		fmt.Println("sleeping")
		time.Sleep(time.Hour)
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring")
		time.Sleep(time.Hour)
	case "selfkill":
		fmt.Println("bye")
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Hour)
	case "grandchild":
		// The grandchild ignores SIGTERM, so only a group SIGKILL removes it.
		gc := exec.Command(self())
		gc.Env = append(os.Environ(), "SUPERVISE_FAKE=ignore-term")
		gc.Stdout = os.Stdout // holds the pipe, as engine workers do
		if err := gc.Start(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("grandchild", gc.Process.Pid)
		if os.Getenv("SUPERVISE_THEN") == "exit" {
			os.Exit(0)
		}
		time.Sleep(time.Hour)
	case "die":
		fmt.Println("loading model 'models/target.gguf'")
		fmt.Fprintln(os.Stderr, "error: failed to open model file")
		os.Exit(3)
	case "http":
		// Deterministic staging driven by the test: refuse until "listen"
		// exists, answer 503 until "ok" exists, then 200.
		dir := os.Getenv("SUPERVISE_DIR")
		for !exists(filepath.Join(dir, "listen")) {
			time.Sleep(5 * time.Millisecond)
		}
		ln, err := net.Listen("tcp", os.Getenv("SUPERVISE_ADDR"))
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !exists(filepath.Join(dir, "ok")) {
				w.WriteHeader(503)
				w.Write([]byte(`{"error":{"message":"Loading model","type":"unavailable_error","code":503}}`))
				return
			}
			w.Write([]byte(`{"status":"ok"}`))
		}))
	case "launcher":
		// A launcher that will be SIGKILLed by the test: no cleanup runs.
		// Report the child only once it has printed its one line, so that its
		// death cannot be a SIGPIPE from writing to our dead pipe.
		sleeping := make(chan struct{})
		var once sync.Once
		p, err := Start(context.Background(), Spec{
			Argv:   []string{self()},
			Env:    append(os.Environ(), "SUPERVISE_FAKE=sleep"),
			OnLine: func(_, line string) { once.Do(func() { close(sleeping) }) },
		})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		<-sleeping
		fmt.Println("child", p.PID())
		time.Sleep(time.Hour)
	default:
		fmt.Fprintln(os.Stderr, "unknown fake mode", mode)
		os.Exit(2)
	}
}

func self() string {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	return exe
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func fake(mode string, env ...string) Spec {
	return Spec{
		Argv: []string{self()},
		Env:  append(append(os.Environ(), "SUPERVISE_FAKE="+mode), env...),
	}
}

// lines collects OnLine calls and lets a test wait for one.
type lines struct {
	mu  sync.Mutex
	got []string // "stream: line"
	ch  chan string
}

func newLines() *lines { return &lines{ch: make(chan string, 100)} }

func (l *lines) on(stream, line string) {
	l.mu.Lock()
	l.got = append(l.got, stream+": "+line)
	l.mu.Unlock()
	select {
	case l.ch <- line:
	default:
	}
}

func (l *lines) waitPrefix(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line := <-l.ch:
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-timeout:
			t.Fatalf("no output line starting %q", prefix)
		}
	}
}

func start(t *testing.T, s Spec) *Process {
	t.Helper()
	p, err := Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	return p
}

func waitDone(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("process did not finish")
	}
}

// alive reports whether pid is a live (non-zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	state := b[i+2]
	return state != 'Z' && state != 'X'
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !alive(pid) {
			return
		}
	}
	t.Fatalf("pid %d still alive", pid)
}

func TestExitCodeAndPrefixedOutput(t *testing.T) {
	var stdout, stderr bytes.Buffer
	l := newLines()
	s := fake("lines", "SUPERVISE_CODE=7")
	s.Prefix, s.Stdout, s.Stderr, s.OnLine = "engine | ", &stdout, &stderr, l.on
	p := start(t, s)
	if p.PID() <= 0 {
		t.Fatalf("PID = %d", p.PID())
	}
	if got := p.ExitCode(); got != -1 {
		t.Errorf("ExitCode before Done = %d, want -1", got)
	}
	waitDone(t, p)
	if got := p.ExitCode(); got != 7 {
		t.Errorf("ExitCode = %d, want 7", got)
	}
	if got, want := stdout.String(), "engine | out 1\nengine | out 2\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got, want := stderr.String(), "engine | err 1\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
	l.mu.Lock()
	got := slices.Sorted(slices.Values(l.got))
	l.mu.Unlock()
	if want := []string{"stderr: err 1", "stdout: out 1", "stdout: out 2"}; !slices.Equal(got, want) {
		t.Errorf("OnLine saw %q, want %q", got, want)
	}
	tail := p.Tail()
	if len(tail) != 3 || slices.Index(tail, "out 1") > slices.Index(tail, "out 2") {
		t.Errorf("Tail = %q, want 3 lines with stdout in order", tail)
	}
}

// Format renders every line in place of Prefix, with the stream it came on.
func TestFormatRendersEachLine(t *testing.T) {
	var stdout, stderr bytes.Buffer
	s := fake("lines")
	s.Prefix, s.Stdout, s.Stderr = "engine | ", &stdout, &stderr
	s.Format = func(stream, line string) []byte { return []byte("{" + stream + ":" + line + "}\n") }
	p := start(t, s)
	waitDone(t, p)
	if got, want := stdout.String(), "{stdout:out 1}\n{stdout:out 2}\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got, want := stderr.String(), "{stderr:err 1}\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

func TestRawPassthroughKeepsBytes(t *testing.T) {
	var stdout bytes.Buffer
	s := fake("partial")
	s.Raw, s.Stdout = true, &stdout
	p := start(t, s)
	waitDone(t, p)
	if got, want := stdout.String(), "a\r\nno newline"; got != want {
		t.Errorf("raw stdout = %q, want %q", got, want)
	}
	if got, want := p.Tail(), []string{"a", "no newline"}; !slices.Equal(got, want) {
		t.Errorf("Tail = %q, want %q", got, want)
	}
}

func TestLongLinesAreSplit(t *testing.T) {
	var stdout bytes.Buffer
	var lens []int
	s := fake("longline")
	s.Stdout = &stdout
	s.OnLine = func(_, line string) { lens = append(lens, len(line)) }
	p := start(t, s)
	waitDone(t, p)
	if want := []int{maxLine, maxLine, 150000 - 2*maxLine, 5}; !slices.Equal(lens, want) {
		t.Errorf("line lengths = %v, want %v", lens, want)
	}
	if got := strings.Count(stdout.String(), "x"); got != 150000 {
		t.Errorf("%d bytes of the long line written, want 150000", got)
	}
}

func TestTailIsBounded(t *testing.T) {
	s := fake("lines")
	s.TailLines = 2
	p := start(t, s)
	waitDone(t, p)
	if got := p.Tail(); len(got) != 2 || got[1] != "out 2" && got[1] != "err 1" {
		t.Errorf("Tail = %q, want the last 2 lines", got)
	}
}

func TestMissingBinaryNamesIt(t *testing.T) {
	for _, argv0 := range []string{"speclaunch-no-such-engine", "/nonexistent/bin/llama-server"} {
		_, err := Start(context.Background(), Spec{Argv: []string{argv0, "--help"}})
		if err == nil || !strings.Contains(err.Error(), argv0) {
			t.Errorf("Start(%q) error = %v, want one naming the binary", argv0, err)
		}
	}
	if _, err := Start(context.Background(), Spec{}); err == nil {
		t.Error("Start with empty Argv succeeded")
	}
}

func TestSignalDeathExitCodes(t *testing.T) {
	t.Run("SIGINT", func(t *testing.T) {
		l := newLines()
		s := fake("sleep")
		s.OnLine = l.on
		p := start(t, s)
		l.waitPrefix(t, "sleeping")
		if err := p.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		waitDone(t, p)
		if got := p.ExitCode(); got != 128+int(syscall.SIGINT) {
			t.Errorf("ExitCode = %d, want 130", got)
		}
		if err := p.Signal(os.Interrupt); !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("Signal after exit = %v, want os.ErrProcessDone", err)
		}
	})
	t.Run("self SIGKILL", func(t *testing.T) {
		p := start(t, fake("selfkill"))
		waitDone(t, p)
		if got := p.ExitCode(); got != 137 {
			t.Errorf("ExitCode = %d, want 137", got)
		}
		if p.Sent(syscall.SIGKILL) {
			t.Errorf("Sent(SIGKILL) for a death the process dealt itself")
		}
	})
}

func TestStopGraceful(t *testing.T) {
	l := newLines()
	s := fake("sleep")
	s.OnLine = l.on
	p := start(t, s)
	l.waitPrefix(t, "sleeping")
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := p.ExitCode(); got != 143 {
		t.Errorf("ExitCode = %d, want 143 (SIGTERM)", got)
	}
	if !p.Sent(syscall.SIGTERM) || p.Sent(syscall.SIGKILL) {
		t.Errorf("Sent: SIGTERM %v, SIGKILL %v; want true, false", p.Sent(syscall.SIGTERM), p.Sent(syscall.SIGKILL))
	}
}

func TestStopEscalatesToSIGKILL(t *testing.T) {
	l := newLines()
	s := fake("ignore-term")
	s.OnLine = l.on
	p := start(t, s)
	l.waitPrefix(t, "ignoring")
	if err := p.Stop(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := p.ExitCode(); got != 137 {
		t.Errorf("ExitCode = %d, want 137 (SIGKILL after the timeout)", got)
	}
	if !p.Sent(syscall.SIGTERM) || !p.Sent(syscall.SIGKILL) {
		t.Errorf("Sent: SIGTERM %v, SIGKILL %v; want both: the death was Stop's", p.Sent(syscall.SIGTERM), p.Sent(syscall.SIGKILL))
	}
	// Idempotent: a second Stop returns at once with the same result.
	if err := p.Stop(time.Hour); err != nil {
		t.Errorf("second Stop = %v", err)
	}
}

func TestStopKillsWholeGroup(t *testing.T) {
	l := newLines()
	s := fake("grandchild")
	s.OnLine = l.on
	p := start(t, s)
	gc, _ := strconv.Atoi(strings.Fields(l.waitPrefix(t, "grandchild"))[1])
	l.waitPrefix(t, "ignoring") // the grandchild now ignores SIGTERM
	if !alive(gc) {
		t.Fatalf("grandchild %d not running", gc)
	}
	// The leader dies of SIGTERM at once; the grandchild ignores SIGTERM
	// and must be SIGKILLed as a straggler, well before this timeout.
	if err := p.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	waitGone(t, gc)
}

func TestLeaderExitKillsStragglers(t *testing.T) {
	l := newLines()
	s := fake("grandchild", "SUPERVISE_THEN=exit")
	s.OnLine = l.on
	p := start(t, s)
	gc, _ := strconv.Atoi(strings.Fields(l.waitPrefix(t, "grandchild"))[1])
	waitDone(t, p) // also proves Done does not wait on the grandchild's pipe
	if got := p.ExitCode(); got != 0 {
		t.Errorf("ExitCode = %d, want 0", got)
	}
	waitGone(t, gc)
}

func TestContextCancelStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	l := newLines()
	s := fake("sleep")
	s.OnLine = l.on
	p, err := Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	l.waitPrefix(t, "sleeping")
	cancel()
	waitDone(t, p)
	if got := p.ExitCode(); got != 143 {
		t.Errorf("ExitCode = %d, want 143", got)
	}
}

// TestNoOrphanWhenLauncherKilled SIGKILLs a launcher (the test binary in
// "launcher" mode, which started its engine through Start) and checks that
// the engine dies with it, by Pdeathsig.
func TestNoOrphanWhenLauncherKilled(t *testing.T) {
	launcher := exec.Command(self())
	launcher.Env = append(os.Environ(), "SUPERVISE_FAKE=launcher")
	out, err := launcher.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	defer launcher.Process.Kill()
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("launcher printed nothing: %v", sc.Err())
	}
	f := strings.Fields(sc.Text())
	if len(f) != 2 || f[0] != "child" {
		t.Fatalf("launcher said %q", sc.Text())
	}
	child, _ := strconv.Atoi(f[1])
	if !alive(child) {
		t.Fatalf("engine %d not running", child)
	}
	launcher.Process.Kill()
	launcher.Wait()
	waitGone(t, child)
}

// TestForkThreadExitDoesNotKillChild calls Start from a goroutine that is
// locked to its thread and then exits, which destroys that thread, and then
// churns through many more locked-and-destroyed threads. Had the fork
// happened on any thread that ended, Pdeathsig would have killed the engine.
func TestForkThreadExitDoesNotKillChild(t *testing.T) {
	l := newLines()
	s := fake("sleep")
	s.OnLine = l.on
	res := make(chan *Process, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		p, err := Start(context.Background(), s)
		if err != nil {
			t.Error(err)
		}
		res <- p
	}()
	p := <-res
	if p == nil {
		return
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	// Then destroy many runtime threads: any of them could be the one the
	// fork ran on if Start did not keep that thread locked.
	for range 10 {
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() { runtime.LockOSThread(); runtime.Gosched() })
		}
		wg.Wait()
	}
	l.waitPrefix(t, "sleeping")
	select {
	case <-p.Done():
		t.Fatalf("engine died (exit %d) when the caller's thread ended", p.ExitCode())
	case <-time.After(300 * time.Millisecond):
	}
}

func TestWaitReadyHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	p := start(t, fake("http", "SUPERVISE_ADDR="+addr, "SUPERVISE_DIR="+dir))

	// Step the fake through refused → 503 → 200, recording what was seen.
	var seen []string
	inner := HTTPReady("http://" + addr + "/health")
	check := func(ctx context.Context) (bool, string, error) {
		ready, detail, err := inner(ctx)
		if !ready && (len(seen) == 0 || seen[len(seen)-1] != detail) {
			seen = append(seen, detail)
		}
		switch detail {
		case "connection refused":
			os.WriteFile(filepath.Join(dir, "listen"), nil, 0o644)
		case "503 Loading model":
			os.WriteFile(filepath.Join(dir, "ok"), nil, 0o644)
		}
		return ready, detail, err
	}
	if err := p.WaitReady(context.Background(), check, 10*time.Second, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if want := []string{"connection refused", "503 Loading model"}; !slices.Equal(seen, want) {
		t.Errorf("details seen = %q, want %q", seen, want)
	}
}

func TestWaitReadyExited(t *testing.T) {
	p := start(t, fake("die"))
	never := func(context.Context) (bool, string, error) { return false, "connection refused", nil }
	err := p.WaitReady(context.Background(), never, 10*time.Second, 10*time.Millisecond)
	var ee *ExitedError
	if !errors.As(err, &ee) {
		t.Fatalf("WaitReady = %v, want *ExitedError", err)
	}
	if ee.Code != 3 {
		t.Errorf("Code = %d, want 3", ee.Code)
	}
	msg := err.Error()
	for _, want := range []string{"code 3", "error: failed to open model file", "loading model"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}

func TestWaitReadyTimeout(t *testing.T) {
	p := start(t, fake("sleep"))
	loading := func(context.Context) (bool, string, error) { return false, "503 Loading model", nil }
	err := p.WaitReady(context.Background(), loading, 200*time.Millisecond, 10*time.Millisecond)
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("WaitReady = %v, want *TimeoutError", err)
	}
	if te.After != 200*time.Millisecond || te.LastDetail != "503 Loading model" {
		t.Errorf("TimeoutError = %+v", te)
	}
	if !strings.Contains(err.Error(), "503 Loading model") {
		t.Errorf("message %q lacks the last detail", err)
	}
	select {
	case <-p.Done():
		t.Error("WaitReady timeout stopped the process; that is the caller's decision")
	default:
	}
}

func TestWaitReadyHungCheckStillTimesOut(t *testing.T) {
	p := start(t, fake("sleep"))
	hang := func(ctx context.Context) (bool, string, error) { <-ctx.Done(); return false, "hung", nil }
	err := p.WaitReady(context.Background(), hang, 200*time.Millisecond, 10*time.Millisecond)
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("WaitReady = %v, want *TimeoutError", err)
	}
}

func TestWaitReadyContextCancelled(t *testing.T) {
	p := start(t, fake("sleep"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	never := func(context.Context) (bool, string, error) { return false, "", nil }
	if err := p.WaitReady(ctx, never, time.Minute, 10*time.Millisecond); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitReady = %v, want context.Canceled", err)
	}
}

func TestHTTPReadyDetails(t *testing.T) {
	serve := func(code int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	// slow answers after d, as SGLang's /health does: it waits at least a
	// second for its one-token health generation.
	slow := func(d time.Duration, code int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(d)
			w.WriteHeader(code)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	tests := []struct {
		name, url  string
		wantReady  bool
		wantDetail string
	}{
		{"ok", serve(200, `{"status":"ok"}`), true, ""},
		{"loading", serve(503, `{"error":{"message":"Loading model","type":"unavailable_error","code":503}}`), false, "503 Loading model"},
		{"plain body", serve(500, "boom\nstack"), false, "500 boom"},
		{"empty body", serve(404, ""), false, "404 Not Found"},
		{"refused", closedURL, false, "connection refused"},
		// vLLM's /health and SGLang's /health answer with empty bodies
		// (docs/engines.md, "vLLM and SGLang"): 503 while SGLang starts or
		// when vLLM's engine died, 200 once ready.
		{"empty 503 (vllm dead, sglang starting)", serve(503, ""), false, "503 Service Unavailable"},
		{"empty 200 (vllm, sglang)", serve(200, ""), true, ""},
		{"sglang one-token generation", slow(time.Second, 200), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready, detail, err := HTTPReady(tt.url)(context.Background())
			if err != nil || ready != tt.wantReady || detail != tt.wantDetail {
				t.Errorf("= (%v, %q, %v), want (%v, %q, nil)", ready, detail, err, tt.wantReady, tt.wantDetail)
			}
		})
	}
	if _, _, err := HTTPReady("://bad")(context.Background()); err == nil {
		t.Error("malformed URL gave no error")
	}
}

func TestBackoff(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 5 * time.Second, Reset: time.Minute}
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next(time.Second))
	}
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("crash loop delays = %v, want %v", got, want)
	}
	if d := b.Next(2 * time.Minute); d != time.Second {
		t.Errorf("after a long healthy run = %v, want reset to 1s", d)
	}
	if d := b.Next(0); d != 2*time.Second {
		t.Errorf("next crash = %v, want 2s", d)
	}
	var zero Backoff
	if d := zero.Next(0); d != 500*time.Millisecond {
		t.Errorf("zero Backoff first delay = %v, want 500ms", d)
	}
}
