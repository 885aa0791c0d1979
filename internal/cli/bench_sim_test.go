package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

func freePortBlock(t *testing.T, n int) int {
	t.Helper()
	return testenv.PortBlock(t, n)
}

// fastSim is a sim cost model about ten times faster than the default GB10
// one, for tests of what a record keeps rather than of how it ranks.
const fastSim = `, "--sim-classic-ms", "1.8", "--sim-verify-ms", "2=2,3=2.5,4=3,16=7", "--sim-draft-ms", "0.1", "--sim-draft-token-ms", "0.05"`

// benchSim runs `speclaunch bench` in-process against the built-in sim
// engine (this test binary re-executed) and returns the record.
func benchSim(t *testing.T, simArgs, widths, maxTokens string, extra ...string) *record.Record {
	t.Helper()
	dir := t.TempDir()
	// model files, so that the record names them by content
	writeFile(t, filepath.Join(dir, "target"), "target weights")
	writeFile(t, filepath.Join(dir, "drafter"), "drafter weights")
	prof := filepath.Join(dir, "p.toml")
	writeFile(t, prof, fmt.Sprintf(`[engine]
name = "sim"
args = ["--sim-warmup", "50ms", "--sim-seed", "7"%s]
[model]
path = "target"
quant = "affine"
[draft]
model = "drafter"
[gpu]
capability = "12.1"
[bench]
base_port = %d
`, simArgs, freePortBlock(t, 8)))
	out := filepath.Join(dir, "rec")
	stdout, log := &syncBuffer{}, &syncBuffer{}
	args := append([]string{"bench", "--profile", prof, "--widths", widths, "--rounds", "3", "--warmup", "1",
		"--max-tokens", maxTokens, "--schedule", "resident", "--out", out, "--log-format", "text"}, extra...)
	code := MainContext(context.Background(), args, policyTOML, stdout, log, nil)
	if code != 0 {
		t.Fatalf("bench exit %d:\n%s%s", code, stdout, log)
	}
	b, err := os.ReadFile(out + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var rec record.Record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	// The verdict on stdout from its first line, the logs on stderr
	// (resultOut): stdout began with a blank line.
	if !strings.HasPrefix(stdout.String(), rec.Verdict.Why) || strings.Contains(stdout.String(), "record written") || !strings.Contains(log.String(), "record written") {
		t.Errorf("bench's verdict is not on stdout alone from its first line, or its logs not on stderr:\nstdout:\n%s\nstderr:\n%s", stdout, log)
	}
	// and what the record earns, as its "Policy entry" section says it
	if _, earns, _ := strings.Cut(stdout.String(), "\nNo policy entry is earned: "); !strings.Contains(earns, "the record is simulated") {
		t.Errorf("bench's stdout does not say that a simulated record earns no entry:\n%s", stdout)
	}
	for _, ext := range []string{".md", ".svg"} {
		if _, err := os.Stat(out + ext); err != nil {
			t.Error(err)
		}
	}
	return &rec
}

func arm(rec *record.Record, label string) *record.Arm {
	for i := range rec.Arms {
		if rec.Arms[i].Label == label {
			return &rec.Arms[i]
		}
	}
	return nil
}

// armAt is the one arm that measured width w (nil if none; fails the test
// when two arms measured it).
func armAt(t *testing.T, rec *record.Record, w int) *record.Arm {
	t.Helper()
	var found *record.Arm
	for i := range rec.Arms {
		if a := &rec.Arms[i]; a.Kind != "classic" && a.Width == w {
			if found != nil {
				t.Errorf("width %d measured twice: %q and %q", w, found.Label, a.Label)
			}
			found = a
		}
	}
	return found
}

// bench on the live sim (this binary re-executed, one engine per arm)
// writes a complete simulated record: every arm measured, the policy's
// width an arm of its own, the models named by content, the probe check
// run, and never an entry proposed from a simulated record. How the arms
// rank is the sim's speed, judged on virtual time by
// bench.TestRunOnSimRanksByCostModel; this run judges no speed.
func TestBenchOnSimWritesRecord(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	rec := benchSim(t, fastSim, "3,16", "24")
	if !rec.Simulated || !rec.Complete {
		t.Fatalf("simulated %v complete %v", rec.Simulated, rec.Complete)
	}
	classic, w3, w16 := arm(rec, "classic"), armAt(t, rec, 3), armAt(t, rec, 16)
	if classic == nil || w3 == nil || w16 == nil {
		t.Fatalf("arms %+v", rec.Arms)
	}
	for _, a := range rec.Arms {
		if a.Status != record.StatusOK || a.Stats.N == 0 || a.Stats.Median <= 0 {
			t.Errorf("%s: status %s, %d runs, median %.1f", a.Label, a.Status, a.Stats.N, a.Stats.Median)
		}
	}
	// 16 is the sim's own default (mirroring mlxcel's DFlash default), so
	// it is the default arm, measured once; the policy's GB10 entry (4)
	// differs, so it has an arm of its own.
	if w16.Kind != "default" || armAt(t, rec, 4) == nil || armAt(t, rec, 4).Kind != "policy" {
		t.Errorf("default arm %+v; policy arm %+v", w16.Label, armAt(t, rec, 4))
	}
	if rec.Verdict.PolicyWidth != 4 || rec.Verdict.PolicyEntry != "gb10-affine-dflash" || !strings.Contains(rec.Verdict.CrossPair, "the policy's entry gb10-affine-dflash sets width 4") {
		t.Errorf("policy in verdict: %d %q %q", rec.Verdict.PolicyWidth, rec.Verdict.PolicyEntry, rec.Verdict.CrossPair)
	}
	for _, m := range rec.Models {
		if len(m.Content) != 64 || !strings.Contains(m.ContentMethod, "sha256") {
			t.Errorf("model %s named without its content: %q %q", m.Role, m.Content, m.ContentMethod)
		}
	}
	if rec.Models[0].Content == rec.Models[1].Content {
		t.Error("target and drafter hash alike")
	}
	if rec.Verdict.EarnsEntry || rec.Verdict.Entry != "" {
		t.Error("a simulated record proposed an entry")
	}
	// The adaptive loop's probe ran on the default arm after its rounds, over
	// one row and the measured widths (3, 4, 16);
	// this sim reports mlxcel's verify-only sync ms per round, so only
	// classic's whole token is set beside it, and nothing is judged.
	if pc := rec.ProbeCheck; pc == nil || pc.Error != "" || pc.OK || len(pc.Rows) != 4 || len(pc.Check) != 1 || !strings.HasPrefix(pc.Arm, "default") || !strings.Contains(pc.Verdict, "no speculative width measured a whole cycle") {
		t.Errorf("probe check %+v", pc)
	}
}

func TestBenchOnSimDeclineIsNotAMeasurement(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	rec := benchSim(t, fastSim+`, "--sim-decline"`, "3", "24")
	w3 := armAt(t, rec, 3)
	if w3 == nil || w3.Status != record.StatusNotMeasurement {
		t.Fatalf("width 3 arm %+v", w3)
	}
	if rec.Verdict.Best != 0 {
		t.Errorf("a declined arm was ranked: best %d", rec.Verdict.Best)
	}
}

// A prompt set, sampled decoding and two requests in flight, in one run:
// every arm runs every prompt, the record keeps per-prompt figures, says
// how it sampled, and sized the engine's slots.
func TestBenchOnSimPromptSetSampledConcurrent(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	// What it checks is bookkeeping, not speed: a cost model about ten times
	// faster than the GB10 one keeps it short.
	rec := benchSim(t, fastSim, "3", "24", "--prompts", "prose", "--temperature", "0.7", "--concurrency", "2")
	m := rec.Method
	if len(m.Prompts) != 4 || m.PromptSet != "shipped:prose" {
		t.Fatalf("prompt set %q %+v", m.PromptSet, m.Prompts)
	}
	if m.Sampling != "sampled" || m.Temperature != 0.7 || !strings.Contains(m.SeedRule, "10007*round") {
		t.Errorf("sampling %q %v %q", m.Sampling, m.Temperature, m.SeedRule)
	}
	if m.Concurrency != 2 || m.Slots != 2 || !strings.Contains(m.SlotsFrom, "--parallel 2, added by bench") {
		t.Errorf("concurrency %d slots %d from %q", m.Concurrency, m.Slots, m.SlotsFrom)
	}
	if !strings.Contains(m.RequestBody, `"temperature":0.7`) || strings.Contains(m.RequestBody, "top_k") {
		t.Errorf("request body %s", m.RequestBody)
	}
	w3 := armAt(t, rec, 3)
	if w3 == nil || w3.Stats.N != 3*4 || len(w3.ByPrompt) != 4 {
		t.Fatalf("width 3: %+v", w3)
	}
	seeds := map[int64]bool{}
	for _, r := range w3.Runs {
		if r.Phase == "measured" {
			if r.Requests != 2 || r.Prompt == "" || r.CompletionTokens != 2*24 {
				t.Errorf("run %d %s: requests %d tokens %d", r.Round, r.Prompt, r.Requests, r.CompletionTokens)
			}
			seeds[r.Seed] = true
		}
	}
	if len(seeds) != 12 {
		t.Errorf("%d distinct seeds over 12 measured runs", len(seeds))
	}
	if w3.IdenticalToClassic != nil {
		t.Error("sampled text was compared with classic's")
	}
	if w3.VsClassic == nil || w3.VsDefault == nil || m.Bootstrap == nil || m.Bootstrap.Resamples != 4000 {
		t.Errorf("comparisons %+v %+v, method %+v", w3.VsClassic, w3.VsDefault, m.Bootstrap)
	}
}
