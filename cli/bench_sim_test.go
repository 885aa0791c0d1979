package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/speclaunch/speclaunch/record"
)

// benchSim runs `speclaunch bench` in-process against the built-in sim
// engine (this test binary re-executed) and returns the record.
func benchSim(t *testing.T, simArgs, widths, maxTokens string) *record.Record {
	t.Helper()
	dir := t.TempDir()
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
`, simArgs, freePort(t)))
	out := filepath.Join(dir, "rec")
	log := &syncBuffer{}
	code := MainContext(context.Background(), []string{"bench", "--profile", prof, "--widths", widths, "--rounds", "3",
		"--max-tokens", maxTokens, "--schedule", "resident", "--out", out, "--log-format", "text"}, policyTOML, log, log, nil)
	if code != 0 {
		t.Fatalf("bench exit %d:\n%s", code, log)
	}
	b, err := os.ReadFile(out + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var rec record.Record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
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

// On sim's GB10 cost model width 3 beats classic (~1.2x) and width 16 loses
// (~0.72x); the bench must rank them so, and never propose an entry from a
// simulated record.
func TestBenchOnSimRanksByCostModel(t *testing.T) {
	rec := benchSim(t, "", "3,16", "60") // shorter outputs stray from the model's means
	if !rec.Simulated || !rec.Complete {
		t.Fatalf("simulated %v complete %v", rec.Simulated, rec.Complete)
	}
	classic, w3, w16 := arm(rec, "classic"), arm(rec, "width 3"), arm(rec, "width 16")
	if classic == nil || w3 == nil || w16 == nil {
		t.Fatalf("arms %+v", rec.Arms)
	}
	if !(w3.Stats.Median > classic.Stats.Median && classic.Stats.Median > w16.Stats.Median) {
		t.Errorf("medians: width 3 %.1f, classic %.1f, width 16 %.1f", w3.Stats.Median, classic.Stats.Median, w16.Stats.Median)
	}
	if !w3.BeatsClassic || w16.BeatsClassic {
		t.Errorf("beats classic: width 3 %v, width 16 %v", w3.BeatsClassic, w16.BeatsClassic)
	}
	if rec.Verdict.Best != 3 && rec.Verdict.Best != 4 {
		t.Errorf("best %d (want 3, or the default's 4 within noise)", rec.Verdict.Best)
	}
	if rec.Verdict.EarnsEntry || rec.Verdict.Entry != "" {
		t.Error("a simulated record proposed an entry")
	}
	// The harness must not be what it measures: client and engine agree.
	for _, a := range rec.Arms {
		if a.EngineRate.Median > 0 && (a.Stats.Median/a.EngineRate.Median < 0.95 || a.Stats.Median/a.EngineRate.Median > 1.02) {
			t.Errorf("%s: client %.1f vs engine %.1f tok/s", a.Label, a.Stats.Median, a.EngineRate.Median)
		}
	}
}

func TestBenchOnSimDeclineIsNotAMeasurement(t *testing.T) {
	rec := benchSim(t, `, "--sim-decline"`, "3", "24")
	w3 := arm(rec, "width 3")
	if w3 == nil || w3.Status != record.StatusNotMeasurement {
		t.Fatalf("width 3 arm %+v", w3)
	}
	if rec.Verdict.Best != 0 {
		t.Errorf("a declined arm was ranked: best %d", rec.Verdict.Best)
	}
}

func TestBenchOnSimDetectsInjectedDrift(t *testing.T) {
	rec := benchSim(t, `, "--sim-drift", "0.15"`, "3", "24")
	if rec.Drift.Overlap {
		t.Fatalf("drift not detected: %+v", rec.Drift)
	}
}
