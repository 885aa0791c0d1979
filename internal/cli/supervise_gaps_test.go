package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/loadgen"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

// An engine that crashes while its restart is still starting is a crash
// like any other under --restart on-failure: back off and retry.
func TestServeRestartCrashWhileStarting(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	dir := t.TempDir()
	// Starts 2 and 3 crash before they are ready; 1 and 4 start normally
	// (and crash 300 ms after, as the profile's args say).
	script := countingEngine(t, dir, `[ $n -eq 2 ] || [ $n -eq 3 ]`, `--sim-fail-start`)
	prof := filepath.Join(dir, "p.toml")
	writeFile(t, prof, strings.Replace(simProfile(freePort(t), `, "--sim-crash-after", "300ms", "--sim-exit-code", "7"`), `name = "sim"`, fmt.Sprintf("name = \"sim\"\nbinary = %q", script), 1))
	r := startServe(t, "--profile", prof, "--restart", "on-failure")
	r.log.waitFor(t, `engine failed to start; retrying`, 2, 30*time.Second)
	r.log.waitFor(t, `ready url=`, 2, 30*time.Second)
	select {
	case c := <-r.code:
		t.Fatalf("launcher exited (%d) although --restart on-failure:\n%s", c, r.log)
	default:
	}
}

// Requests that arrive while a crashed engine is restarted under
// --restart on-failure are held and answered by the restarted engine, not
// failed; /health says "switching" meanwhile.
func TestServeRestartHoldsRequests(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	dir := t.TempDir()
	// The first engine crashes 500 ms after it is ready; later ones serve.
	script := countingEngine(t, dir, `[ $n -eq 1 ]`, `--sim-crash-after 500ms --sim-exit-code 7`)
	// The restart (start 2) waits at its gate until the test lifts it:
	// the restart lasts until the requests are held, whatever the load.
	gate := filepath.Join(dir, "hold-2")
	writeFile(t, gate, "")
	port := freePort(t)
	prof := filepath.Join(dir, "p.toml")
	writeFile(t, prof, strings.Replace(simProfile(port, ""), `name = "sim"`, fmt.Sprintf("name = \"sim\"\nbinary = %q", script), 1))
	r := startServe(t, "--profile", prof, "--restart", "on-failure")
	r.log.waitFor(t, `engine exited; restarting`, 1, 30*time.Second)
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "switching") {
		t.Errorf("/health during the restart: %d %s", resp.StatusCode, body)
	}
	type outcome struct {
		res loadgen.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := loadgen.Run(context.Background(), loadgen.Options{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Clients: 2, Requests: 2, Stream: true, MaxTokens: 4})
		done <- outcome{res, err}
	}()
	// Both clients' first requests arrived during the restart: held.
	if st := waitStatus(t, port, 20*time.Second, func(st statusDoc) bool { return st.Proxy.HeldNow == 2 }); st.Proxy.HeldNow != 2 {
		t.Errorf("%d requests held during the restart, want 2; log:\n%s", st.Proxy.HeldNow, r.log)
	}
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	o := <-done
	res, err := o.res, o.err
	if err != nil {
		t.Fatal(err)
	}
	if res.Bad() != 0 || res.OK != 4 {
		t.Errorf("requests sent during the restart: %s\nlog:\n%s", res, r.log)
	}
	if n := len(pids(r.log.String())); n != 2 {
		t.Errorf("%d engine starts, want 2", n)
	}
	// The crash was recovered from: a clean stop after it exits 0, not
	// the crashed engine's 7.
	r.stop()
	if code := r.exit(t, 30*time.Second); code != 0 {
		t.Errorf("exit %d after a stop that cut nothing, want 0; log:\n%s", code, r.log)
	}
}

// A reload whose new address cannot be bound stops nothing: the engine
// keeps serving on the old one, in direct mode and behind the proxy.
func TestServeReloadBusyPortKeepsServing(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	for _, proxy := range []bool{false, true} {
		t.Run(fmt.Sprint("proxy=", proxy), func(t *testing.T) {
			dir := t.TempDir()
			port := freePort(t)
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer busy.Close()
			bport := busy.Addr().(*net.TCPAddr).Port
			prof := filepath.Join(dir, "p.toml")
			base := simProfile(port, "")
			writeFile(t, prof, base)
			r := startServe(t, "--profile", prof, fmt.Sprintf("--proxy=%v", proxy))
			r.log.waitFor(t, `width verified width=4`, 1, 20*time.Second)
			renameOver(t, prof, strings.Replace(withWidth(base, 3), fmt.Sprintf("port = %d", port), fmt.Sprintf("port = %d", bport), 1))
			r.log.waitFor(t, `new settings cannot start; the engine keeps running`, 1, 20*time.Second)
			// The cause is its own line of the text log, written after the
			// message: wait for it rather than read the log at once.
			r.log.waitFor(t, regexp.QuoteMeta(fmt.Sprintf("port %d on 127.0.0.1 is not available", bport)), 1, 20*time.Second)
			if n := len(pids(r.log.String())); n != 1 {
				t.Errorf("%d engine starts, want 1 (nothing restarted)", n)
			}
			if r.log.count(`stopping`) != 0 {
				t.Errorf("something was stopped:\n%s", r.log)
			}
			if health(port) != 200 {
				t.Error("the old address stopped serving")
			}
		})
	}
}

// SIGHUP reloads the profile even under --watch=false: watching is about
// files, not signals.
func TestServeSIGHUPReloadsWithoutWatch(t *testing.T) {
	testenv.E2E(t)
	r, prof, base, _ := serveSim(t, "", "--watch=false")
	// A watcher says so before the first engine starts ("watching for
	// changes"): none runs, so no file change can reach the engine.
	if r.log.count(`watching for changes`) != 0 {
		t.Fatalf("--watch=false watches the files:\n%s", r.log)
	}
	writeFile(t, prof, withWidth(base, 5))
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	r.log.waitFor(t, `width verified width=5`, 1, 20*time.Second)
	// The one reload is the SIGHUP's, not the write's.
	if n, m := r.log.count(`reloading`), r.log.count(`reloading files=.* why=SIGHUP`); n != 1 || m != 1 {
		t.Fatalf("--watch=false reloaded on a file change (%d reloads, %d by SIGHUP):\n%s", n, m, r.log)
	}
}

// An empty profile (a truncate-then-write caught halfway, here by a
// SIGHUP) is not applied as all defaults: the reload waits for the next
// write and says so.
func TestServeReloadEmptyProfileNotApplied(t *testing.T) {
	testenv.E2E(t)
	r, prof, base, port := serveSim(t, "", "--watch=false")
	writeFile(t, prof, "")
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	r.log.waitFor(t, `file is empty \(a write caught halfway\?\); not applied`, 1, 20*time.Second)
	if n := r.log.count(`reload rejected|switching engines`); n != 0 {
		t.Errorf("the empty profile was loaded:\n%s", r.log)
	}
	writeFile(t, prof, withWidth(base, 5))
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	r.log.waitFor(t, `width verified width=5`, 1, 20*time.Second)
	if health(port) != 200 {
		t.Error("not serving after the next write")
	}
}

// A profile that was empty when serve started (everything from flags) is
// not a write caught halfway: SIGHUP still reloads it.
func TestServeReloadProfileEmptyFromStart(t *testing.T) {
	testenv.E2E(t)
	prof := filepath.Join(t.TempDir(), "p.toml")
	writeFile(t, prof, "")
	r := startServe(t, "--profile", prof, "--watch=false", "--engine", "sim", "-m", "target", "--port", fmt.Sprint(freePort(t)))
	r.log.waitFor(t, `ready url=`, 1, 20*time.Second)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	r.log.waitFor(t, `engine command unchanged`, 1, 20*time.Second)
	if strings.Contains(r.log.String(), "caught halfway") || strings.Contains(r.log.String(), "reload rejected") {
		t.Errorf("a profile empty from the start was refused:\n%s", r.log)
	}
}

// SIGTERM while a reload's engine is still starting stops everything
// without claiming the new settings failed, in both switch modes.
func TestServeSIGTERMDuringSwitch(t *testing.T) {
	testenv.E2E(t)
	for _, mode := range []string{"overlap", "drain"} {
		t.Run(mode, func(t *testing.T) {
			r, prof, base, port := serveSim(t, "", "--switch", mode)
			renameOver(t, prof, strings.Replace(withWidth(base, 3), `"100ms"`, `"30s"`, 1))
			r.log.waitFor(t, `switching engines mode=`+mode, 1, 20*time.Second)
			r.log.waitFor(t, `starting engine for the new settings`, 1, 20*time.Second)
			// The status names the engine that serves: the old one in an
			// overlap, none in a drain (the old one is stopped).
			if st := status(t, port); (st.Engine == nil) != (mode == "drain") {
				t.Errorf("%s: status engine %+v while the new engine starts", mode, st.Engine)
			}
			// The new engine's first line: its process runs, in its 30 s
			// load, when SIGTERM comes.
			r.log.waitFor(t, `engine 2 \| speclaunch sim:`, 1, 20*time.Second)
			syscall.Kill(os.Getpid(), syscall.SIGTERM)
			r.exit(t, 20*time.Second)
			for _, bad := range []string{"failed", "going back", "ERR"} {
				if strings.Contains(r.log.String(), bad) {
					t.Errorf("log says %q after SIGTERM during a switch:\n%s", bad, r.log)
				}
			}
			if health(port) == 200 {
				t.Error("still serving after SIGTERM")
			}
		})
	}
}

// serveSim writes a sim profile (with extra engine args) on a free port,
// starts serve with it and waits until the engine's width is verified.
func serveSim(t *testing.T, extra string, args ...string) (r *serveRun, prof, base string, port int) {
	t.Helper()
	port = freePort(t)
	prof = filepath.Join(t.TempDir(), "p.toml")
	base = simProfile(port, extra)
	writeFile(t, prof, base)
	r = startServe(t, append([]string{"--profile", prof}, args...)...)
	r.log.waitFor(t, `width verified width=4`, 1, 20*time.Second)
	// The engine serves a moment after its width is verified; until then
	// the status names none (a test reading it at once failed under load).
	if st := waitStatus(t, port, 20*time.Second, func(st statusDoc) bool { return st.Engine != nil }); st.Engine == nil {
		t.Fatalf("the engine is verified but does not serve; log:\n%s", r.log)
	}
	return r, prof, base, port
}

// A reload caught while a switch to the same settings is under way (an
// editor's second write, a SIGHUP after the edit) starts no second engine.
func TestServeReloadDuringSwitchToSameSettings(t *testing.T) {
	testenv.E2E(t)
	r, prof, base, port := serveSim(t, "", "--watch=false")
	slow := strings.Replace(withWidth(base, 3), `"100ms"`, `"1s"`, 1)
	writeFile(t, prof, slow)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	r.log.waitFor(t, `starting engine for the new settings`, 1, 20*time.Second)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	r.log.waitFor(t, `switched to_pid`, 1, 20*time.Second)
	// The second reload, held until the switch ended, is taken in without
	// a switch: both count as applied once the runtime has answered them
	// (taken in, or switched to), and nothing else waits.
	waitReloadsApplied(t, port, 2)
	if n := r.log.count(`switching engines`); n != 1 {
		t.Fatalf("%d switches for one edit, want 1:\n%s", n, r.log)
	}
}

// Settings read only at start say so when a reload changes them, instead
// of being ignored in silence: adapt.* at warn, server.proxy by rejecting
// the reload.
func TestServeReloadWarnsStartOnlySettings(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	r, prof, base, _ := serveSim(t, "")
	writeFile(t, prof, base+"[adapt]\nenabled = true\n")
	r.log.waitFor(t, `adapt.\* settings apply when speclaunch starts`, 1, 20*time.Second)
	writeFile(t, prof, strings.Replace(base, "[server]\n", "[server]\nproxy = false\n", 1))
	r.log.waitFor(t, `server.proxy cannot change under a running server: restart speclaunch`, 1, 20*time.Second)
}

// An edit back to the serving settings while a switch away from them is
// under way is the latest edit: it wins, the engine ends at the file's width.
func TestServeReloadBackDuringSwitchWins(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	r, prof, base, port := serveSim(t, "")
	slow := strings.Replace(base, `"100ms"`, `"1s"`, 1) // width 4, each start 1 s
	writeFile(t, prof, slow)
	r.log.waitFor(t, `switched to_pid`, 1, 20*time.Second)
	writeFile(t, prof, withWidth(slow, 3))
	r.log.waitFor(t, `starting engine for the new settings`, 2, 20*time.Second)
	writeFile(t, prof, slow) // back to what serves now, while the switch to 3 runs
	r.log.waitFor(t, `reloading`, 3, 20*time.Second)
	r.log.waitFor(t, `switched to_pid`, 3, 20*time.Second)
	if st := status(t, port); st.Engine == nil || st.Engine.Width != 4 {
		t.Fatalf("engine %+v, want width 4 as the profile says now; log:\n%s", st.Engine, r.log)
	}
}

// countingEngine writes a stand-in engine binary that counts its starts in
// dir and runs the sim (this test binary) with extra sim flags on the starts
// for which the shell test cond (over $n, the start number) holds. Start n
// waits while a file hold-n is in dir: a test holds a start open that way
// until it has seen what it must see during it.
func countingEngine(t *testing.T, dir, cond, extra string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "engine.sh")
	writeFile(t, script, fmt.Sprintf(`#!/bin/sh
n=$(cat %[1]s/count 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]s/count
while [ -e %[1]s/hold-$n ]; do sleep 0.05; done
if %[3]s; then exec %[2]s "$@" %[4]s; fi
exec %[2]s "$@"
`, dir, self, cond, extra))
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// An edit saved while the first engine is still loading is applied once it
// serves: the watcher's baseline is what was loaded, not what the file
// holds when the engine is ready.
func TestServeEditDuringFirstLoadApplied(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	port := freePort(t)
	prof := filepath.Join(t.TempDir(), "p.toml")
	base := strings.Replace(simProfile(port, ""), `"100ms"`, `"1500ms"`, 1)
	writeFile(t, prof, base)
	r := startServe(t, "--profile", prof)
	r.log.waitFor(t, `starting engine`, 1, 20*time.Second)
	renameOver(t, prof, withWidth(base, 3))
	r.log.waitFor(t, `width verified width=4`, 1, 20*time.Second)
	r.log.waitFor(t, `switched to_pid=\d+ width=3`, 1, 20*time.Second)
}
