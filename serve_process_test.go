package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/testenv"
)

// children lists the processes whose parent is pid (from /proc).
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// SIGKILL of the launcher in the middle of an overlap switch, with two
// engines running, leaves neither behind.
func TestSIGKILLDuringOverlapLeavesNoEngine(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // the end-to-end tests wait on their children together
	bin := staticBinary(t)
	dir := t.TempDir()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	prof := filepath.Join(dir, "p.toml")
	profile := func(warmup string, w int) string {
		return fmt.Sprintf("[engine]\nname = \"sim\"\nargs = [\"--sim-warmup\", %q]\n[model]\npath = \"t\"\n[draft]\nmodel = \"d\"\nblock_size = %d\n[server]\nport = %d\nswitch = \"overlap\"\n", warmup, w, port)
	}
	os.WriteFile(prof, []byte(profile("100ms", 4)), 0o644)
	cmd := exec.Command(bin, "serve", "--profile", prof, "--log-format", "text")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitLine := func(sub string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("launcher ended before %q", sub)
				}
				if strings.Contains(l, sub) {
					return
				}
			case <-deadline:
				t.Fatalf("no %q", sub)
			}
		}
	}
	waitLine("width verified")
	os.WriteFile(prof+".tmp", []byte(profile("60s", 3)), 0o644)
	os.Rename(prof+".tmp", prof)
	waitLine("starting engine for the new settings")
	var engines []int
	for deadline := time.Now().Add(10 * time.Second); len(engines) < 2 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		engines = children(cmd.Process.Pid)
	}
	if len(engines) != 2 {
		t.Fatalf("want two engines during the overlap, found %v", engines)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		left := 0
		for _, p := range engines {
			if alive(p) {
				left++
			}
		}
		if left == 0 {
			return
		}
	}
	t.Fatalf("engines %v outlived the SIGKILLed launcher", engines)
}

// SIGHUP while the first engine is still loading neither ends the launcher
// (its default action) nor is lost: the profile is reloaded once the engine
// serves.
func TestSIGHUPDuringFirstLoadReloadsAfter(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // the end-to-end tests wait on their children together
	bin := staticBinary(t)
	dir := t.TempDir()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	prof := filepath.Join(dir, "p.toml")
	profile := func(w int, watch string) string {
		return fmt.Sprintf("[engine]\nname = \"sim\"\nargs = [\"--sim-warmup\", \"1500ms\"]\n[model]\npath = \"t\"\n[draft]\nmodel = \"d\"\nblock_size = %d\n[server]\nport = %d\n[serve]\nwatch = %s\n", w, port, watch)
	}
	for _, watch := range []string{"false", "true"} {
		t.Run("watch="+watch, func(t *testing.T) {
			os.WriteFile(prof, []byte(profile(4, watch)), 0o644)
			cmd := exec.Command(bin, "serve", "--profile", prof, "--log-format", "text")
			stderr, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
			lines := make(chan string, 200)
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			waitLine := func(sub string) {
				t.Helper()
				deadline := time.After(30 * time.Second)
				for {
					select {
					case l, ok := <-lines:
						if !ok {
							t.Fatalf("launcher ended (%v) before %q", cmd.Wait(), sub)
						}
						if strings.Contains(l, sub) {
							return
						}
					case <-deadline:
						t.Fatalf("no %q", sub)
					}
				}
			}
			// SIGHUP is caught before the first engine starts: its
			// start line is the marker, and its 1.5 s load is under way.
			waitLine("starting engine:")
			os.WriteFile(prof, []byte(profile(3, watch)), 0o644)
			cmd.Process.Signal(syscall.SIGHUP)
			waitLine("width verified width=4")
			waitLine("width verified width=3")
		})
	}
}

// SIGINT while the adaptive loop probes the engine stops the loop before
// the engine: the probe's cut-off request is not reported as an engine
// that cannot be probed.
func TestSIGINTDuringProbeIsNoProbeFailure(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // the end-to-end tests wait on their children together
	bin := staticBinary(t)
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// The demo's GB10 sim model is slow to probe: seconds of probing.
	cmd := exec.Command(bin, "serve", "--profile", "profiles/demo.toml", "--adapt", "--port", strconv.Itoa(port), "--log-format", "text")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir())
	var out strings.Builder
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	probing := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		seen := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			// A probe's first line, said as it starts (the one before
			// traffic, seconds long on this model, or one under load).
			if !seen && strings.Contains(sc.Text(), "adapt: probing") {
				seen = true
				close(probing)
			}
		}
	}()
	select {
	case <-probing:
	case <-time.After(30 * time.Second):
		t.Fatal("the loop did not probe")
	}
	cmd.Process.Signal(syscall.SIGINT)
	<-done
	cmd.Wait()
	if strings.Contains(out.String(), "cannot be probed") || strings.Contains(out.String(), "adaptive width off") {
		t.Errorf("SIGINT during the probe was reported as a probe failure:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "engine stopped") {
		t.Errorf("no engine stop in the log:\n%s", out.String())
	}
}

// TestClosedStdoutIsNoDeath: a write to a stdout whose reader went away
// (`speclaunch tune --json | head -3`) fails with EPIPE; the process is
// not killed by SIGPIPE (exit 141, nothing said), as Go kills it by
// default for fd 1 and 2.
func TestClosedStdoutIsNoDeath(t *testing.T) {
	testenv.E2E(t)
	bin := staticBinary(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "resolve", "--profile", "profiles/demo.toml")
	cmd.Stdout, cmd.Stderr = w, &stderr
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok && !ee.Exited() {
		t.Fatalf("resolve with its stdout closed was killed: %v (stderr %q)", err, stderr.String())
	}
}
