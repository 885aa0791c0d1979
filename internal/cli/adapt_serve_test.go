package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/loadgen"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

// adaptSimProfile writes a sim profile in dir that adapts fast (64-cycle
// epochs, a 1 s window) with the sim's acceptance profile prof.
func adaptSimProfile(t *testing.T, dir string, port int, prof string) string {
	t.Helper()
	p := filepath.Join(dir, "p.toml")
	writeFile(t, p, simProfile(port, `, "--sim-profile", "`+prof+`", "--sim-noise", "0"`)+`[adapt]
enabled = true
min_cycles = 64
window = "1s"
`)
	return p
}

// farAdaptProfile is a sim profile whose adaptive loop must move: no
// policy entry for its capability, so it starts at the sim's default 16,
// far slower on the sim's cost than the widths it may try (8 at most),
// and it moves whatever a busy machine's load does to its readings. From
// the policy's 4, near the best, it chose by a margin a busy CI machine's
// timings could erase: a trial predicted +0.8 % waited out a test's
// minute, and under -race the flat profile's verify probe put classic
// first (+3.4 %, no trial) where width 8 wins by far.
func farAdaptProfile(t *testing.T, port, minCycles int) string {
	t.Helper()
	base := simProfile(port, `, "--sim-noise", "0"`)
	body := strings.Replace(base, `capability = "12.1"`, `capability = "9.0"`, 1)
	if body == base {
		t.Fatal("simProfile sets no capability 12.1 for farAdaptProfile to replace")
	}
	return body + fmt.Sprintf("[adapt]\nenabled = true\nmax_width = 8\nmin_cycles = %d\nwindow = \"1s\"\n", minCycles)
}

// startAdaptServe serves profile p and waits until the first engine is
// verified.
func startAdaptServe(t *testing.T, p string, port int) *serveRun {
	t.Helper()
	r := startServe(t, "--profile", p)
	r.log.waitFor(t, `width verified`, 1, 20*time.Second)
	for i := 0; i < 200 && adaptState(t, port) == "probing"; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	return r
}

// An operator width turns adaptation off, and says so.
func TestServeAdaptOffUnderOperatorWidth(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	dir := t.TempDir()
	p := filepath.Join(dir, "p.toml")
	writeFile(t, p, withWidth(simProfile(freePort(t), ""), 3)+"[adapt]\nenabled = true\n")
	r := startServe(t, "--profile", p)
	r.log.waitFor(t, `adaptive width off: an operator width is set \(profile .*p.toml:\d+\); it always wins`, 1, 20*time.Second)
}

func adaptState(t *testing.T, port int) string {
	t.Helper()
	return adaptStatus(t, port).State
}

// adaptStatus is the adapt object of /speclaunch/status, in part.
type adaptDoc struct {
	State     string `json:"state"`
	Decisions int    `json:"decisions"`
	Resumed   string `json:"resumed"`
}

func adaptStatus(t *testing.T, port int) adaptDoc {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/speclaunch/status", port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Adapt adaptDoc `json:"adapt"`
	}
	json.NewDecoder(resp.Body).Decode(&st)
	return st.Adapt
}

// A launcher restarted on the same model pair resumes what the last one
// learnt (saved in the cache directory, at the latest when it stopped)
// and says so in its status.
func TestServeAdaptResumesAfterRestart(t *testing.T) {
	testenv.E2E(t)
	t.Parallel()                         // see TestMain
	cache := os.Getenv("XDG_CACHE_HOME") // TestMain's, shared: the state's key names this test's files
	dir := t.TempDir()
	port := freePort(t)
	// The state is keyed by the model files' content: they must be files.
	writeFile(t, filepath.Join(dir, "target"), "target weights")
	writeFile(t, filepath.Join(dir, "drafter"), "drafter weights")
	p := adaptSimProfile(t, dir, port, "geometric")
	r := startAdaptServe(t, p, port)
	// Traffic the loop learns from, then a stop: what it learnt is saved
	// at the latest then, whether or not a decision came first (under
	// -race on CI the test that waited a minute for a decision failed).
	res, err := loadgen.Run(context.Background(), loadgen.Options{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Clients: 1, Requests: 6, Stream: true, MaxTokens: 64})
	if err != nil || res.OK == 0 {
		t.Fatalf("no request served (%v): %s; log:\n%s", err, res, r.log)
	}
	r.stop()
	r.exit(t, 15*time.Second)
	if !strings.Contains(r.log.String(), "adapt: what was learnt is saved") {
		t.Errorf("the stop said no save; log:\n%s", r.log)
	}
	saved := statesOf(t, cache, dir)
	if len(saved) != 1 {
		t.Fatalf("saved states %v, want one; log:\n%s", saved, r.log)
	}
	// Whatever six requests taught it, the state says width 6 was
	// learnt for one request in flight: the restart starts at it.
	learnt(t, saved[0], 6)

	r2 := startServe(t, "--profile", p)
	r2.log.waitFor(t, `starting engine: draft width 6 \(resumed: learnt for 1 request in flight by an earlier run`, 1, 20*time.Second)
	r2.log.waitFor(t, `resuming what an earlier run learnt`, 1, 20*time.Second)
	r2.log.waitFor(t, `width verified`, 1, 20*time.Second) // said before the proxy serves: wait for it
	if a := adaptStatus(t, port); a.Resumed == "" {
		t.Errorf("status %+v does not say it resumed", a)
	}
	if strings.Contains(r2.log.String(), "learning again") {
		t.Errorf("the saved state was not taken:\n%s", r2.log)
	}
	// A reload keeps the width resumed, as it keeps an adaptive switch's:
	// it went back to the policy's 4, restarting the engine.
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, string(b)+"# a comment\n")
	r2.log.waitFor(t, `reload: engine command unchanged; nothing to do width=6`, 1, 20*time.Second)
}

// A profile edit that changes no setting (here a comment) keeps the width
// the adaptive loop chose instead of going back to the policy's. Which
// width the loop chooses is the sim's speed, judged on virtual time in
// internal/adapt; here any width it chose must survive the edit.
func TestServeAdaptedWidthSurvivesReload(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	dir := t.TempDir()
	port := freePort(t)
	p := filepath.Join(dir, "p.toml")
	body := farAdaptProfile(t, port, 64)
	writeFile(t, p, body)
	r := startServe(t, "--profile", p)
	r.log.waitFor(t, `width verified`, 1, 20*time.Second)
	for i := 0; i < 200 && adaptState(t, port) == "probing"; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go loadgen.Run(ctx, loadgen.Options{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Clients: 2, Duration: 60 * time.Second, Stream: true, MaxTokens: 64})
	adapted := func(st statusDoc) bool { return st.Engine != nil && st.Engine.WidthSource == "adaptive" }
	if st := waitStatus(t, port, 60*time.Second, adapted); !adapted(st) {
		t.Fatalf("the loop chose no width; engine %+v; log:\n%s", st.Engine, r.log)
	}
	cancel()
	writeFile(t, p, body+"# a comment\n")
	// The reload decides at once whether the engine command changes: it
	// must find the adapted width's command unchanged (a switch back to
	// the policy's width would say "engine command changed").
	r.log.waitFor(t, `reload: engine command unchanged; nothing to do width=\d+`, 1, 20*time.Second)
	m := regexp.MustCompile(`reload: engine command unchanged; nothing to do width=(\d+)`).FindStringSubmatch(r.log.String())
	if after := r.log.String()[strings.LastIndex(r.log.String(), "reloading"):]; strings.Contains(after, "engine command changed") {
		t.Fatalf("a comment edit changed the engine command (back to the policy's width?); log:\n%s", r.log)
	}
	if st := status(t, port); !adapted(st) || fmt.Sprint(st.Engine.Width) != m[1] {
		t.Fatalf("after a comment edit the engine runs %+v, want the adapted width %s; log:\n%s", st.Engine, m[1], r.log)
	}
}

// A reload that sets an operator width ends adaptation, saying so: the loop
// stops and /speclaunch/status says why.
func TestServeAdaptOffAfterReloadSetsWidth(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	dir := t.TempDir()
	port := freePort(t)
	p := filepath.Join(dir, "p.toml")
	body := simProfile(port, "")
	writeFile(t, p, body+"[adapt]\nenabled = true\n")
	r := startServe(t, "--profile", p)
	r.log.waitFor(t, `adaptive width on`, 1, 20*time.Second)
	writeFile(t, p, withWidth(body, 3)+"[adapt]\nenabled = true\n")
	r.log.waitFor(t, `adaptive width off: an operator width is set \(profile .*p.toml:\d+\); it always wins; it stays off until speclaunch restarts`, 1, 20*time.Second)
	for deadline := time.Now().Add(10 * time.Second); adaptState(t, port) != "not adapting"; {
		if time.Now().After(deadline) {
			t.Fatalf("adapt state %q after the operator width; log:\n%s", adaptState(t, port), r.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// learnt rewrites the state file so that its schedule holds width w,
// learnt, for one request in flight.
func learnt(t *testing.T, file string, w int) {
	t.Helper()
	b := editedJSON(t, file, func(st map[string]any) {
		first := st["pair"].(map[string]any)["Schedule"].([]any)[0].(map[string]any)
		first["width"], first["source"] = w, fmt.Sprintf("width %d measured", w)
	})
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// statesOf are the adaptive states saved in cache whose key names a model
// file in dir.
func statesOf(t *testing.T, cache, dir string) []string {
	t.Helper()
	all, _ := filepath.Glob(filepath.Join(cache, "speclaunch", "adapt-control-*.json"))
	var mine []string
	for _, f := range all {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), `"path":"`+filepath.Join(dir, "target")+`"`) {
			mine = append(mine, f)
		}
	}
	return mine
}
