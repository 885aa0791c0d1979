package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/speclaunch/speclaunch/internal/loadgen"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

// streamWhole sends one streamed completion and reports whether it ended
// whole: a finish_reason and then [DONE].
func streamWhole(port, tokens int) error {
	body := fmt.Sprintf(`{"model":"target","prompt":"def fib(n):","max_tokens":%d,"stream":true}`, tokens)
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/completions", port), "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	finished, done := false, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		finished = finished || strings.Contains(line, `"finish_reason":"`)
		done = done || line == "data: [DONE]"
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if !finished || !done {
		return fmt.Errorf("the stream ended without its final event (finish_reason %v, [DONE] %v)", finished, done)
	}
	return nil
}

// SIGTERM with four streams in flight: readiness goes 503 and new
// requests get 503 with Retry-After at once; the four finish whole; the
// exit code is 0.
func TestServeSIGTERMLetsRequestsFinish(t *testing.T) {
	testenv.E2E(t)
	r, _, _, port := serveSim(t, "")
	errs := make(chan error, 4)
	for range 4 {
		go func() { errs <- streamWhole(port, 48) }()
	}
	waitStatus(t, port, 10*time.Second, func(st statusDoc) bool { return st.Engine != nil && st.Engine.InFlight == 4 })
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	r.log.waitFor(t, `stopping: requests in flight may finish`, 1, 10*time.Second)
	if c := health(port); c != 503 {
		t.Errorf("/health answered %d while stopping, want 503 (readiness down)", c)
	}
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/completions", port), "application/json", strings.NewReader(`{"prompt":"x","max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a new request while stopping got %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Errorf("a request in flight at SIGTERM did not finish whole: %v", err)
		}
	}
	if c := r.exit(t, 20*time.Second); c != 0 {
		t.Errorf("exit code %d, want 0; log:\n%s", c, r.log)
	}
}

// SIGTERM with a request that outlasts --shutdown-timeout: the engine is
// stopped, serve exits 4 (requests cut), and the client gets a 503 that says so, not an empty reply
// (the proxy waited to learn whether the engine was gone longer than the
// listener's grace).
func TestServeShutdownTimeoutAnswersTheRequestsCut(t *testing.T) {
	testenv.E2E(t)
	r, _, _, port := serveSim(t, "", "--shutdown-timeout", "1s")
	got := make(chan error, 1)
	go func() {
		resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/completions", port), "application/json",
			strings.NewReader(`{"prompt":"def fib(n):","max_tokens":60000}`))
		if err != nil {
			got <- err
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 503 || !strings.Contains(string(b), "stopped the engine before it answered") {
			got <- fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
			return
		}
		got <- nil
	}()
	waitStatus(t, port, 10*time.Second, func(st statusDoc) bool { return st.Engine != nil && st.Engine.InFlight == 1 })
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	if err := <-got; err != nil {
		t.Errorf("the request cut at the shutdown timeout: %v, want a 503 saying why; log:\n%s", err, r.log)
	}
	// Issue 33: a stop that cut requests is not a clean stop (exit 0).
	if c := r.exit(t, 20*time.Second); c != 4 || !strings.Contains(r.log.String(), "stopped with 1 request(s) in flight cut (the shutdown timeout passed)") {
		t.Errorf("exit %d, want 4 with an error line saying a request was cut; log:\n%s", c, r.log)
	}
}

// An engine that stops answering (SIGSTOP) does not hang the launcher:
// /health answers from the runtime's state; after --hang-timeout the
// engine is killed and replaced. A request sent to it meanwhile, which had
// no response byte, is answered by the replacement; a stream under way on
// it ends with an event naming the liveness check (with a restart to
// follow it read "the engine failed during this response (the engine
// closed the connection)", 502).
func TestServeHungEngineIsReplaced(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	r, _, _, port := serveSim(t, "", "--hang-timeout", "2s", "--restart", "on-failure")
	st := status(t, port)
	if st.Engine == nil {
		t.Fatal("no engine in the status")
	}
	hung := st.Engine.PID
	// bounded: a stream the kill does not end fails the test, not the run
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Post(fmt.Sprintf("http://127.0.0.1:%d/v1/completions", port), "application/json",
		strings.NewReader(`{"prompt":"def fib(n):","max_tokens":60000,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q, %v: want an event under way", line, err)
	}
	if err := syscall.Kill(hung, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(hung, syscall.SIGKILL)
	answered := make(chan error, 1)
	go func() { answered <- streamWhole(port, 8) }()
	client := &http.Client{Timeout: 5 * time.Second}
	health, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/health", port))
	if err != nil {
		t.Fatalf("/health did not answer while the engine hangs: %v", err)
	}
	health.Body.Close()
	rest, _ := io.ReadAll(rd)
	tail := string(rest)
	if i := strings.LastIndex(tail, "data: "); i >= 0 {
		tail = tail[i:]
	}
	if !strings.Contains(tail, `"code":503`) || !strings.Contains(tail, "speclaunch stopped the engine during this response (it stopped answering its liveness check)") {
		t.Errorf("the stream cut by the hung engine's kill ended %q, want a 503 event naming the liveness check; log:\n%s", tail, r.log)
	}
	r.log.waitFor(t, `restarting engine`, 1, 20*time.Second)
	if err := <-answered; err != nil {
		t.Errorf("the request sent to the hung engine failed instead of going to its replacement: %v\n%s", err, r.log)
	}
	// The proxy routes to the new engine a moment before the status names
	// it (the runtime routes, then tells the launcher): wait for it.
	replaced := func(st statusDoc) bool { return st.Engine != nil && st.Engine.PID != hung }
	if st := waitStatus(t, port, 20*time.Second, replaced); !replaced(st) {
		t.Errorf("status engine %+v, want a new engine", st.Engine)
	}
}

// Drain mode checks what it can before it stops the old engine: a new
// engine binary that does not exist is refused and the old engine serves
// on, never stopped.
func TestServeDrainChecksBeforeStopping(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	r, prof, base, port := serveSim(t, "", "--switch", "drain")
	bad := strings.Replace(withWidth(base, 3), "[engine]\n", "[engine]\nbinary = \"/nonexistent/engine\"\n", 1)
	renameOver(t, prof, bad)
	r.log.waitFor(t, `reload rejected; the engine keeps running`, 1, 20*time.Second)
	if strings.Contains(r.log.String(), "stopping engine") {
		t.Fatalf("the old engine was stopped for a switch that could not start:\n%s", r.log)
	}
	if err := streamWhole(port, 4); err != nil {
		t.Errorf("the old engine does not serve after the rejected reload: %v", err)
	}
}

// A drain switch's record names the width it left, though that engine is
// gone before the new one serves, and how long the old one drained.
func TestServeDrainSwitchRecord(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	r, prof, base, port := serveSim(t, "", "--switch", "drain")
	renameOver(t, prof, withWidth(base, 3))
	r.log.waitFor(t, `switched to_pid=\d+ width=3`, 1, 20*time.Second)
	st := status(t, port)
	if len(st.Switches) != 1 {
		t.Fatalf("switches %+v", st.Switches)
	}
	if s := st.Switches[0]; s.Mode != "drain" || !s.OK || s.FromWidth != 4 || s.ToWidth != 3 || s.DrainMS <= 0 {
		t.Errorf("switch %+v: want drain 4 → 3 with drain_ms", s)
	}
}

// A policy file the profile names only after serve started (a reload) is
// watched from then on, even while it is missing: its arrival and its
// edits switch the width like any other change.
func TestServeWatchesAPolicyFileAddedByAReload(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	r, prof, base, _ := serveSim(t, "")
	pol := filepath.Join(filepath.Dir(prof), "pol.toml")
	entry := func(w int) string {
		return fmt.Sprintf("schema = 1\n[[entry]]\nid = \"gb10-affine-dflash\"\nengine = \"mlxcel\"\ndrafter = \"dflash\"\n"+
			"capability = \"12.1\"\nquant = \"affine\"\nwidth = %d\nrunner_up = 3\npin = \"mlx 81ba1c6a\"\nrecord = \"docs/benchmark_results/x.md\"\n", w)
	}
	// Named before it exists: the reload is rejected, and the file's
	// arrival is a change.
	renameOver(t, prof, base+"[policy]\nfiles = [\"pol.toml\"]\n")
	r.log.waitFor(t, `reload rejected`, 1, 20*time.Second)
	renameOver(t, pol, entry(5))
	r.log.waitFor(t, `switched to_pid=\d+ width=5`, 1, 20*time.Second)
	renameOver(t, pol, entry(6))
	r.log.waitFor(t, `switched to_pid=\d+ width=6`, 1, 20*time.Second)
}

// The tuned layer is watched from the start, before tune made it or its
// directory, and stays watched after a rejected reload: the reviewer's
// steps (a switch, a rejected edit, a fixed one) each reach the engine
// without a SIGHUP.
func TestServeWatchesTheTunedLayer(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain; its tuned layer is its own (withEnv)
	cfg := t.TempDir()
	tuned := filepath.Join(cfg, "speclaunch", TunedFile)
	port := freePort(t)
	prof := filepath.Join(t.TempDir(), "p.toml")
	writeFile(t, prof, simProfile(port, ""))
	ctx, cancel := context.WithCancel(context.Background())
	log := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- withEnv(map[string]string{"XDG_CONFIG_HOME": cfg}).main(ctx, []string{"serve", "--log-format", "text", "--profile", prof}, log, log)
	}()
	defer func() {
		cancel()
		<-done
	}()
	log.waitFor(t, `width verified width=4`, 1, 20*time.Second)
	entry := func(w int) string {
		return fmt.Sprintf("schema = 1\n[[entry]]\nid = \"gb10-affine-dflash\"\nengine = \"mlxcel\"\ndrafter = \"dflash\"\n"+
			"capability = \"12.1\"\nquant = \"affine\"\nwidth = %d\nrunner_up = 3\npin = \"mlx 81ba1c6a\"\nrecord = \"docs/benchmark_results/x.md\"\n", w)
	}
	if err := os.MkdirAll(filepath.Dir(tuned), 0o755); err != nil {
		t.Fatal(err)
	}
	renameOver(t, tuned, entry(5)) // written while serve runs
	log.waitFor(t, `switched to_pid=\d+ width=5`, 1, 20*time.Second)
	renameOver(t, tuned, strings.Replace(entry(5), "width = 5", "width = 0", 1))
	log.waitFor(t, `reload rejected`, 1, 20*time.Second)
	renameOver(t, tuned, entry(6))
	log.waitFor(t, `switched to_pid=\d+ width=6`, 1, 20*time.Second)
}

// GET /metrics is the engine's series followed by speclaunch's own, one
// exposition the Prometheus text parser reads; /speclaunch/metrics has
// speclaunch's alone; a switch shows in its counters.
func TestServeMetrics(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	r, prof, base, port := serveSim(t, "")
	renameOver(t, prof, withWidth(base, 3))
	r.log.waitFor(t, `switched to_pid=\d+ width=3`, 1, 20*time.Second)
	fams := scrape(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	engine := 0
	for name := range fams {
		if !strings.HasPrefix(name, "speclaunch_") {
			engine++
		}
	}
	if engine == 0 {
		t.Errorf("no engine series in /metrics: %v", keys(fams))
	}
	want := map[string]float64{
		"speclaunch_width":          3,
		"speclaunch_width_verified": 1,
	}
	for name, v := range want {
		f := fams[name]
		if f == nil {
			t.Errorf("/metrics lacks %s: %v", name, keys(fams))
			continue
		}
		m := f.GetMetric()[0]
		got := m.GetGauge().GetValue() + m.GetCounter().GetValue()
		if got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}
	// Every kind × mode × outcome series exists from the start, at zero:
	// the one switch counts in kind=reload mode=overlap outcome=ok alone.
	if fams["speclaunch_switches_total"] == nil {
		t.Fatalf("/metrics lacks speclaunch_switches_total: %v", keys(fams))
	}
	switches := 0.0
	for _, m := range fams["speclaunch_switches_total"].GetMetric() {
		switches += m.GetCounter().GetValue()
		if l := m.GetLabel(); m.GetCounter().GetValue() > 0 && (len(l) != 3 || l[0].GetValue() != "reload" || l[1].GetValue() != "overlap" || l[2].GetValue() != "ok") {
			t.Errorf("switch labels %v, want kind=reload mode=overlap outcome=ok", l)
		}
	}
	if switches != 1 {
		t.Errorf("speclaunch_switches_total = %v in all, want 1", switches)
	}
	own := scrape(t, fmt.Sprintf("http://127.0.0.1:%d/speclaunch/metrics", port))
	for name := range own {
		if !strings.HasPrefix(name, "speclaunch_") {
			t.Errorf("/speclaunch/metrics has the engine's %s", name)
		}
	}
	if own["speclaunch_state"] == nil {
		t.Errorf("/speclaunch/metrics lacks speclaunch_state: %v", keys(own))
	}
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: HTTP %d", url, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s does not parse as Prometheus text: %v", url, err)
	}
	return fams
}

func keys(m map[string]*dto.MetricFamily) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The launcher's own requests are accounted for: profile edits that
// replace the engine while the adaptive loop probes and scrapes it neither
// stop an engine under a probe nor turn the loop off; it goes on with the
// engine that replaces it.
func TestServeAdaptSurvivesEditsDuringProbes(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	dir := t.TempDir()
	port := freePort(t)
	p := filepath.Join(dir, "p.toml")
	base := simProfile(port, `, "--sim-profile", "geometric"`) + "[adapt]\nenabled = true\nmin_cycles = 32\nwindow = \"1s\"\n"
	writeFile(t, p, base)
	r := startServe(t, "--profile", p)
	r.log.waitFor(t, `adaptive width on`, 1, 30*time.Second)
	stop := make(chan struct{})
	loaded := make(chan loadgen.Result, 1)
	go func() {
		res, _ := loadgen.Run(context.Background(), loadgen.Options{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Clients: 2, Stop: stop, Duration: time.Minute, Stream: true, MaxTokens: 32})
		loaded <- res
	}()
	for i, warm := range []string{"150ms", "120ms", "180ms"} {
		renameOver(t, p, strings.Replace(base, `"100ms"`, `"`+warm+`"`, 1))
		r.log.waitFor(t, `switched to_pid=\d+ width=\d+ mode=overlap`, i+1, 30*time.Second)
	}
	// The loop is still there after the edits: it decides again on the
	// engine that serves now.
	decisions := r.log.count(`component=adapt`)
	r.log.waitFor(t, `component=adapt`, decisions+1, 60*time.Second)
	close(stop)
	res := <-loaded
	if strings.Contains(r.log.String(), "adaptive width off") || adaptState(t, port) == "not adapting" {
		t.Fatalf("the loop turned itself off after engine switches; log:\n%s", r.log)
	}
	if res.Bad() != 0 {
		t.Errorf("load through the edits: %s", res)
	}
}
