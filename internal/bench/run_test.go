package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/record"
)

func newRecord() *record.Record {
	return &record.Record{
		Name:   "test-sweep",
		Key:    record.Key{Engine: "llama.cpp", Drafter: "draft", Capability: "9.0", Quant: "q4_0"},
		Host:   record.Host{GPU: "NVIDIA H200", Capability: "9.0"},
		Engine: record.Engine{Name: "llama.cpp", Pin: "llama.cpp d32676d"},
	}
}

func TestRunRanksByCostModel(t *testing.T) {
	for _, schedule := range []string{ScheduleRestart, ScheduleResident} {
		t.Run(schedule, func(t *testing.T) {
			e := newFakeEngine(t, costModels())
			arms := specArms()
			o := testOptions(arms)
			o.Schedule = schedule
			rec := newRecord()
			if err := Run(context.Background(), o, e.starter(), rec); err != nil {
				t.Fatal(err)
			}
			if e.liveServers() != 0 {
				t.Errorf("%d servers left running", e.liveServers())
			}
			wantStarts := int32(len(arms))
			if schedule == ScheduleRestart {
				wantStarts = int32(o.Rounds * (len(arms) + 1))
			}
			if got := e.starts.Load(); got != wantStarts {
				t.Errorf("starts = %d, want %d", got, wantStarts)
			}
			if !rec.Complete {
				t.Error("record not complete")
			}
			for i, a := range rec.Arms {
				if a.Status != record.StatusOK {
					t.Errorf("%s: status %s (%s)", a.Label, a.Status, a.StatusReason)
				}
				n := o.Rounds
				if a.Kind == KindClassic {
					n = 2 * o.Rounds
				}
				if a.Stats.N != n {
					t.Errorf("%s: n = %d, want %d", a.Label, a.Stats.N, n)
				}
				if i > 0 && !a.BeatsClassic {
					t.Errorf("%s: does not beat classic: %+v vs %+v", a.Label, a.Stats, rec.Arms[0].Stats)
				}
			}
			// the cost model's order: width 4 (18 ms) > width 6 (24 ms) > width 2 (28.8 ms)
			w2, w4, w6 := &rec.Arms[2], &rec.Arms[3], &rec.Arms[4]
			if !(w4.Stats.Median > w6.Stats.Median && w6.Stats.Median > w2.Stats.Median) {
				t.Errorf("medians out of the cost model's order: w2 %.1f, w4 %.1f, w6 %.1f", w2.Stats.Median, w4.Stats.Median, w6.Stats.Median)
			}
			v := rec.Verdict
			if v.Best != 4 || v.RunnerUp != 3 {
				t.Errorf("best %d runner-up %d, want 4 and the default's 3 (why: %s)", v.Best, v.RunnerUp, v.Why)
			}
			if v.DefaultWidth != 3 {
				t.Errorf("default width %d", v.DefaultWidth)
			}
			if !v.EarnsEntry || !strings.Contains(v.Entry, "width = 4\n") || !strings.Contains(v.Entry, `id = "h200-q4_0-draft"`) ||
				!strings.Contains(v.Entry, `record = "docs/benchmark_results/test-sweep.md"`) {
				t.Errorf("entry not earned or wrong: earns=%v %q (%s)", v.EarnsEntry, v.Entry, v.NoEntryReason)
			}
			// acceptance side from the counters: width 6 drafts 5 and accepts 3 per cycle
			ac := w6.Acceptance
			if ac.Cycles != 6*o.Rounds || ac.Drafted != 30*o.Rounds || ac.Accepted != 18*o.Rounds {
				t.Errorf("width 6 acceptance %+v", ac)
			}
			if ac.MeanAccepted != 4 {
				t.Errorf("width 6 mean accepted len %.3f, want 4 (24 tokens / 6 cycles)", ac.MeanAccepted)
			}
			if want := []float64{1, 1, 1, 0, 0}; !reflect.DeepEqual(ac.ByPosition, want) {
				t.Errorf("width 6 by position %v, want %v", ac.ByPosition, want)
			}
			for _, r := range w6.Runs {
				if r.Phase == PhaseMeasured && r.CyclesFrom != "metrics" {
					t.Errorf("width 6 cycles from %q, want metrics", r.CyclesFrom)
				}
			}
			if w6.Cost.VerifyRows != 6 || w6.Cost.MSPerCycle <= 0 || rec.Arms[0].Cost.VerifyRows != 1 {
				t.Errorf("cost sides: w6 %+v classic %+v", w6.Cost, rec.Arms[0].Cost)
			}
			if w4.IdenticalToClassic == nil || !*w4.IdenticalToClassic || w4.FirstDiffToken != -1 {
				t.Errorf("identity: %v %d", w4.IdenticalToClassic, w4.FirstDiffToken)
			}
			if len(w4.PairedDeltas) != o.Rounds {
				t.Errorf("paired deltas %v", w4.PairedDeltas)
			}
			if !rec.Drift.Overlap {
				t.Errorf("drift flagged on a steady fake: %s", rec.Drift.Verdict)
			}
		})
	}
}

func TestRunRoundsFloor(t *testing.T) {
	called := false
	start := func(context.Context, ArmSpec, int) (Server, error) { called = true; return nil, errors.New("x") }
	for _, n := range []int{1, 2} {
		o := testOptions(specArms())
		o.Rounds = n
		err := Run(context.Background(), o, start, newRecord())
		if err == nil || !strings.Contains(err.Error(), "floor of 3") {
			t.Errorf("rounds %d: err = %v", n, err)
		}
	}
	if called {
		t.Error("a server was started for a refused plan")
	}
	o := testOptions([]ArmSpec{{Label: "width 4", Kind: KindWidth, Width: 4}})
	if err := Run(context.Background(), o, start, newRecord()); err == nil {
		t.Error("a plan without classic was accepted")
	}
	o = testOptions(append(specArms(), ArmSpec{Label: "width 1", Kind: KindWidth, Width: 1}))
	if err := Run(context.Background(), o, start, newRecord()); err == nil {
		t.Error("width 1 was accepted")
	}
}

// A plan whose record would hold more runs than a record may is refused
// before anything starts: the record would be written at the end of the
// sweep and then refused by every command that reads one. At the bounds
// it is run.
func TestRunRecordSizeBounds(t *testing.T) {
	var started atomic.Int64 // the resident schedule starts its arms at once
	start := func(context.Context, ArmSpec, int) (Server, error) { started.Add(1); return nil, errors.New("x") }
	for _, c := range []struct {
		name     string
		rounds   int
		schedule string
		widths   int
		refused  string
	}{
		{"classic at the bound", (record.MaxRunsPerArm - 1) / 2, ScheduleResident, 1, ""},
		{"classic over the bound", 600, ScheduleResident, 1, "runs in the classic arm"},
		{"warm-ups count under restart", (record.MaxRunsPerArm - 1) / 2, ScheduleRestart, 1, "runs in the classic arm"},
		{"rounds far over", 99999999999, ScheduleResident, 1, "rounds would make a record above"},
		{"warm-ups that would overflow the count", -1, ScheduleRestart, 1, "warm-up requests would make a record above"},
		{"the record over the bound", 100, ScheduleResident, 150, "a record of"},
	} {
		t.Run(c.name, func(t *testing.T) {
			arms := []ArmSpec{{Label: "classic", Kind: KindClassic}}
			for w := range c.widths {
				arms = append(arms, ArmSpec{Label: fmt.Sprintf("width %d", w+2), Kind: KindWidth, Width: w + 2})
			}
			o := testOptions(arms)
			o.Rounds, o.Schedule, o.Warmup, o.BasePort = c.rounds, c.schedule, 1, 20000
			if c.rounds < 0 { // 2^62 warm-ups: 4 rounds of them overflow the count
				o.Rounds, o.Warmup = 4, 1<<62
			}
			started.Store(0)
			err := Run(context.Background(), o, start, newRecord())
			if c.refused == "" {
				if started.Load() == 0 {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.refused) || started.Load() != 0 {
				t.Errorf("err %v, %d servers started: want %q before any start", err, started.Load(), c.refused)
			}
		})
	}
}

func TestDeclinedAndSilentArmsAreNotMeasurements(t *testing.T) {
	models := costModels()
	models["width 8"] = engineModel{cycle: 3 * time.Millisecond, perCycle: 4, draftN: 7, declined: true, metrics: true}
	models["width 10"] = engineModel{cycle: 3 * time.Millisecond, perCycle: 6, draftN: 9, noDraftFields: true}
	arms := specArms(ArmSpec{Label: "width 8", Kind: KindWidth, Width: 8}, ArmSpec{Label: "width 10", Kind: KindWidth, Width: 10})
	e := newFakeEngine(t, models)
	rec := newRecord()
	if err := Run(context.Background(), testOptions(arms), e.starter(), rec); err != nil {
		t.Fatal(err)
	}
	w8, w10 := &rec.Arms[5], &rec.Arms[6]
	if w8.Status != record.StatusNotMeasurement || !strings.Contains(w8.StatusReason, "declined") {
		t.Errorf("declined arm: %s (%s)", w8.Status, w8.StatusReason)
	}
	// width 10 is the fastest fake of all (6 tokens per 3 ms) but reported no
	// draft counters: it must not be ranked.
	if w10.Status != record.StatusNotMeasurement || !strings.Contains(w10.StatusReason, "draft") {
		t.Errorf("silent arm: %s (%s)", w10.Status, w10.StatusReason)
	}
	if w8.BeatsClassic || w10.BeatsClassic {
		t.Error("a NOT A MEASUREMENT arm beats classic")
	}
	if rec.Verdict.Best != 4 || rec.Verdict.RunnerUp == 10 || rec.Verdict.RunnerUp == 8 {
		t.Errorf("verdict ranked a NOT A MEASUREMENT arm: %+v", rec.Verdict)
	}
	md := string(RenderMarkdown(rec))
	if !strings.Contains(md, "NOT A MEASUREMENT (the engine declined speculation") {
		t.Errorf("markdown does not mark the declined arm:\n%s", md)
	}
}

func TestDriftDetected(t *testing.T) {
	// Classic slows through each round (heat that builds while the arms run
	// and clears while servers restart): its last-of-round samples are much
	// slower than its first.
	models := costModels()
	c := models["classic"]
	c.slow = func(k int) float64 {
		if k%4 >= 2 { // requests: warm-up, first, warm-up, last per round
			return 1.8
		}
		return 1
	}
	models["classic"] = c
	e := newFakeEngine(t, models)
	rec := newRecord()
	if err := Run(context.Background(), testOptions(specArms()), e.starter(), rec); err != nil {
		t.Fatal(err)
	}
	if rec.Drift.Overlap {
		t.Fatalf("drift not detected: first %+v last %+v", rec.Drift.First, rec.Drift.Last)
	}
	if !strings.Contains(rec.Drift.Verdict, "the run drifted (classic first") || !strings.Contains(rec.Drift.Verdict, "treat every middle arm as suspect") {
		t.Errorf("verdict %q", rec.Drift.Verdict)
	}
	// Drift is noted where the entry is proposed, not a rule of its own
	// (docs/policy.md): the margin takes classic over both brackets.
	if !strings.Contains(rec.Verdict.Why, "the run drifted") {
		t.Errorf("the verdict does not name the drift: %s", rec.Verdict.Why)
	}
}

func TestSteadyDriftDetected(t *testing.T) {
	// Classic slows a little with every request across the whole run: both
	// brackets widen alike and overlap, but the run's first and second
	// halves do not.
	models := costModels()
	c := models["classic"]
	c.slow = func(k int) float64 { return 1 + 0.15*float64(k) }
	models["classic"] = c
	e := newFakeEngine(t, models)
	rec := newRecord()
	if err := Run(context.Background(), testOptions(specArms()), e.starter(), rec); err != nil {
		t.Fatal(err)
	}
	if rec.Drift.Overlap {
		t.Fatalf("steady drift not detected: early %+v late %+v (%s)", rec.Drift.Early, rec.Drift.Late, rec.Drift.Verdict)
	}
	if !strings.Contains(rec.Drift.Verdict, "drifted across rounds") {
		t.Errorf("verdict %q", rec.Drift.Verdict)
	}
}

func TestFailedStarterRecordedOthersGoOn(t *testing.T) {
	for _, schedule := range []string{ScheduleRestart, ScheduleResident} {
		t.Run(schedule, func(t *testing.T) {
			e := newFakeEngine(t, costModels())
			e.failOn["width 6"] = true
			var prog bytes.Buffer
			o := testOptions(specArms())
			o.Schedule, o.Progress, o.JSONProgress = schedule, &prog, true
			rec := newRecord()
			if err := Run(context.Background(), o, e.starter(), rec); err != nil {
				t.Fatal(err)
			}
			w6 := &rec.Arms[4]
			if w6.Status != record.StatusFailed || !strings.Contains(w6.StatusReason, "exited with status 1") {
				t.Errorf("width 6: %s (%s)", w6.Status, w6.StatusReason)
			}
			if len(w6.LastLog) != 2 || w6.LastLog[1] != "error: out of memory" {
				t.Errorf("last log %q", w6.LastLog)
			}
			for i, a := range rec.Arms {
				if i != 4 && a.Status != record.StatusOK {
					t.Errorf("%s: %s (%s)", a.Label, a.Status, a.StatusReason)
				}
			}
			if rec.Verdict.Best != 4 || rec.Verdict.RunnerUp != 3 {
				t.Errorf("verdict %+v", rec.Verdict)
			}
			if e.liveServers() != 0 {
				t.Errorf("%d servers left", e.liveServers())
			}
			events := map[string]int{}
			sc := bufio.NewScanner(&prog)
			for sc.Scan() {
				var ev map[string]any
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
					t.Fatalf("progress line %q: %v", sc.Text(), err)
				}
				events[ev["event"].(string)]++
				if ev["event"] == "request" {
					for _, k := range []string{"arm", "round", "tok_s", "eta_s"} {
						if _, ok := ev[k]; !ok {
							t.Errorf("request event lacks %s: %s", k, sc.Text())
						}
					}
				}
			}
			wantFailed := 1
			if schedule == ScheduleRestart {
				wantFailed = 1 // not retried in later rounds
			}
			if events["start"] != 1 || events["done"] != 1 || events["arm_failed"] != wantFailed || events["request"] == 0 {
				t.Errorf("progress events %v", events)
			}
		})
	}
}

func TestMidStreamErrorIsARecordedRun(t *testing.T) {
	models := costModels()
	m := models["width 6"]
	m.failAt = func(k int) bool { return k == 3 } // round 2's measured request
	models["width 6"] = m
	e := newFakeEngine(t, models)
	o := testOptions(specArms())
	o.Rounds = 4
	rec := newRecord()
	if err := Run(context.Background(), o, e.starter(), rec); err != nil {
		t.Fatal(err)
	}
	w6 := &rec.Arms[4]
	errs := 0
	for _, r := range w6.Runs {
		if r.Error != "" {
			errs++
			if !strings.Contains(r.Error, "Content-only format") || r.Phase != PhaseMeasured || r.Round != 2 {
				t.Errorf("error run %+v", r)
			}
		}
	}
	if errs != 1 || w6.Stats.N != 3 || w6.Status != record.StatusOK {
		t.Errorf("errors %d, n %d, status %s", errs, w6.Stats.N, w6.Status)
	}
}

func TestCancelStopsEveryServer(t *testing.T) {
	for _, schedule := range []string{ScheduleRestart, ScheduleResident} {
		t.Run(schedule, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			models := costModels()
			m := models["width 6"]
			m.onRequest = func(k int) {
				if k == 2 {
					cancel()
				}
			}
			models["width 6"] = m
			e := newFakeEngine(t, models)
			o := testOptions(specArms())
			o.Schedule = schedule
			rec := newRecord()
			err := Run(ctx, o, e.starter(), rec)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if e.liveServers() != 0 {
				t.Errorf("%d servers still running after cancel", e.liveServers())
			}
			if got, want := e.stops.Load(), e.starts.Load(); got != want {
				t.Errorf("stops %d != starts %d", got, want)
			}
			if rec.Complete {
				t.Error("an interrupted record says complete")
			}
			if rec.Verdict.EarnsEntry {
				t.Error("an interrupted record earned an entry")
			}
			if !strings.Contains(string(RenderMarkdown(rec)), "INCOMPLETE (interrupted)") {
				t.Error("markdown lacks the INCOMPLETE banner")
			}
			if len(rec.Arms[0].Runs) == 0 {
				t.Error("no partial data kept")
			}
		})
	}
}

func TestEngineWidthMismatchNoted(t *testing.T) {
	models := costModels()
	m := models["width 6"]
	m.engineWidth = 5
	models["width 6"] = m
	e := newFakeEngine(t, models)
	rec := newRecord()
	if err := Run(context.Background(), testOptions(specArms()), e.starter(), rec); err != nil {
		t.Fatal(err)
	}
	w6 := &rec.Arms[4]
	if w6.EngineWidth != 5 || w6.Width != 6 || !strings.Contains(w6.StatusReason, "engine clamped/ran width 5") {
		t.Errorf("width 6 arm: engine %d width %d reason %q", w6.EngineWidth, w6.Width, w6.StatusReason)
	}
	if w6.Cost.VerifyRows != 5 {
		t.Errorf("verify rows %d, want the width that ran (5)", w6.Cost.VerifyRows)
	}
}

func TestDiagnosticsAndDraftRounds(t *testing.T) {
	// mlxcel's shape: draft_rounds in the timings and a diagnostics line per
	// request; the cost side comes from the diagnostics' sync time.
	models := costModels()
	for _, l := range []string{"default = 3", "width 2", "width 4", "width 6"} {
		m := models[l]
		m.metrics, m.draftRounds, m.diagnostics = false, true, true
		models[l] = m
	}
	e := newFakeEngine(t, models)
	rec := newRecord()
	if err := Run(context.Background(), testOptions(specArms()), e.starter(), rec); err != nil {
		t.Fatal(err)
	}
	w4 := &rec.Arms[3]
	for _, r := range w4.Runs {
		if r.Phase != PhaseMeasured {
			continue
		}
		if r.CyclesFrom != "draft_rounds" || r.Cycles != 6 || r.DiagRounds != 6 || r.DiagProposed != 18 {
			t.Errorf("run %+v", r)
		}
	}
	if !strings.Contains(w4.Cost.Method, "diagnostics") {
		t.Errorf("cost method %q", w4.Cost.Method)
	}
	if w4.Acceptance.Rate != 1 || w4.Acceptance.ByPosition != nil {
		t.Errorf("acceptance %+v", w4.Acceptance)
	}
}

func TestIdentityFirstDifference(t *testing.T) {
	models := costModels()
	m := models["width 6"]
	m.word = "tak" // " tok0" vs " tak0": differs at character 2 of the first piece
	models["width 6"] = m
	e := newFakeEngine(t, models)
	rec := newRecord()
	if err := Run(context.Background(), testOptions(specArms()), e.starter(), rec); err != nil {
		t.Fatal(err)
	}
	w6 := &rec.Arms[4]
	if w6.IdenticalToClassic == nil || *w6.IdenticalToClassic || w6.FirstDiffChar != 2 || w6.FirstDiffToken != 0 {
		t.Errorf("identity %v char %d token %d", w6.IdenticalToClassic, w6.FirstDiffChar, w6.FirstDiffToken)
	}
}

func TestRoundOrder(t *testing.T) {
	labels := func(vs []visit) []int {
		var out []int
		for _, v := range vs {
			out = append(out, v.arm)
		}
		return out
	}
	others := []int{1, 2, 3}
	for r, want := range [][]int{{0, 1, 2, 3, 0}, {0, 2, 3, 1, 0}, {0, 3, 1, 2, 0}, {0, 1, 2, 3, 0}} {
		got := roundOrder(0, others, r)
		if !reflect.DeepEqual(labels(got), want) || got[0].bracket != BracketFirst || got[4].bracket != BracketLast {
			t.Errorf("round %d: %v", r, got)
		}
	}
}

// A cancelled run's last JSON event says what stopped it in the caller's
// words (the context's cause; speclaunch gives the signal's): it said Go's
// "context canceled".
func TestCancelSaysItsCause(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause error  // nil: cancelled with none
		want  string // in the done event
	}{
		{"a signal's words", errors.New("interrupted (SIGINT)"), `"error":"interrupted (SIGINT)"`},
		{"none given", nil, `"error":"context canceled"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			models := costModels()
			m := models["width 6"]
			m.onRequest = func(k int) {
				if k == 2 {
					cancel(tc.cause)
				}
			}
			models["width 6"] = m
			e := newFakeEngine(t, models)
			o := testOptions(specArms())
			var prog bytes.Buffer
			o.Progress, o.JSONProgress = &prog, true
			if err := Run(ctx, o, e.starter(), newRecord()); !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			lines := strings.Split(strings.TrimSpace(prog.String()), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, `{"event":"done","complete":false`) || !strings.Contains(last, tc.want) {
				t.Errorf("last event %s, want the done event with %s", last, tc.want)
			}
		})
	}
}

// Each prompt of a set is warmed once, so a warm-up below the set's size
// is raised to it, and Check says so (bench prints it): --prompts code
// --warmup 1 ran 4 warm-ups and said nothing.
func TestCheckSaysARaisedWarmup(t *testing.T) {
	set := []Prompt{{Name: "a", Text: "a"}, {Name: "b", Text: "b"}, {Name: "c", Text: "c"}, {Name: "d", Text: "d"}}
	for _, tc := range []struct {
		name    string
		warmup  int
		prompts []Prompt
		want    string // "" for no note
	}{
		{"one prompt, one warm-up", 1, nil, ""},
		{"a set, one warm-up", 1, set, "4 warm-up requests per server start, not 1: at least one per prompt of the set (4 prompts)"},
		{"a set, the default", 0, set, "4 warm-up requests per server start, not 3: at least one per prompt of the set (4 prompts)"},
		{"a set, more than its prompts", 5, set, ""},
		{"a set, as many as its prompts", 4, set, ""},
		{"a set, none", -1, set, ""},
	} {
		o := testOptions(specArms())
		o.Warmup, o.Prompts = tc.warmup, tc.prompts
		if note, err := Check(o); err != nil || note != tc.want {
			t.Errorf("%s: note %q (%v), want %q", tc.name, note, err, tc.want)
		}
	}
}
