package adapt

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func learntKeyFor(slots int) CacheKey {
	return CacheKey{Engine: "llama.cpp 0 (d32676d)", GPU: "NVIDIA H200", Capability: "9.0", Slots: slots,
		Models: []ModelFile{{Path: "/m/target.gguf", Size: 1, SHA256: "aa"}, {Path: "/m/draft.gguf", Size: 2, SHA256: "bb"}}}
}

func learntLoop(t *testing.T, dir string, key CacheKey, log *slog.Logger) *Loop {
	t.Helper()
	slots := key.Slots
	key.Slots = 0 // the loop adds the engine's slots itself
	l := New(LoopDeps{Current: func() Target { return Target{Width: 4, Pair: "p"} }, Switch: func(context.Context, int, string) error { return nil },
		Log: log, Cfg: testCfg(), CacheDir: dir, CacheKey: key, Now: func() time.Time { return time.Unix(1_800_000_000, 0) }})
	l.slots, l.pair = slots, "p"
	return l
}

// A launcher restarted on the same engine, GPU, model files and slots
// resumes what the last one learnt: the widths' costs, the acceptance, the
// widths undone, its prediction error and switch time, so it does not
// explore again; another slot count starts from nothing.
func TestLearntSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	a := learntLoop(t, dir, learntKeyFor(4), quietLog())
	a.width, a.home = 8, 5 // exploring 8 from 5
	a.measured = map[int]Measure{1: {MS: 5.15, Cycles: 4000, N: 4}, 5: {MS: 8.8, Cycles: 2728, N: 4, SE: 0.02}, 8: {MS: 12.4, Cycles: 648, N: 4}}
	a.wide = acc(1000, 0.7, 0.45, 0.33, 0.3, 0.26, 0.23, 0.2)
	a.avoid[3] = true
	a.status.Prediction = PredictionError{N: 2, MeanAbs: 0.08, RMS: 0.1, Last: 0.151}
	a.switchS, a.status.Decisions = 1.04, 7
	a.saveLearnt(false)
	if _, err := os.Stat(learntPath(dir, learntKeyFor(4))); err != nil {
		t.Fatalf("nothing saved: %v", err)
	}

	b := learntLoop(t, dir, learntKeyFor(4), quietLog())
	b.resume()
	if !reflect.DeepEqual(b.measured, a.measured) || !reflect.DeepEqual(b.wide, a.wide) || !b.avoid[3] ||
		b.status.Prediction != a.status.Prediction || b.switchS != 1.04 || b.status.Resumed != "2027-01-15T08:00:00Z" {
		t.Fatalf("resumed measured %v wide %v avoid %v prediction %+v switch %v resumed %q", b.measured, b.wide, b.avoid, b.status.Prediction, b.switchS, b.status.Resumed)
	}
	if s, _ := LoadLearnt(dir, learntKeyFor(4), nil); s.Width != 5 {
		t.Errorf("saved width %d, want the home width 5 (8 was an exploration)", s.Width)
	}
	// Resumed once: what it learns next is not overwritten by the file.
	b.measured[2] = Measure{MS: 5, N: 4}
	b.resume()
	if _, ok := b.measured[2]; !ok {
		t.Error("a second resume replaced what the loop had learnt")
	}

	// Through start, as Run begins: resumed, and no exploration of the
	// positions the saved acceptance covers (rows to 8: W0 = 8).
	d := learntLoop(t, dir, learntKeyFor(4), quietLog())
	d.cfg.Curve = &Curve{VerifyMS: map[int]float64{1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 2, 7: 2, 8: 2}}
	if err := d.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d.status.Resumed == "" || d.exploreFirst || d.w0 != 8 {
		t.Errorf("start: resumed %q, exploreFirst %v (W0 %d)", d.status.Resumed, d.exploreFirst, d.w0)
	}

	c := learntLoop(t, dir, learntKeyFor(1), quietLog())
	c.resume()
	if len(c.measured) != 0 || len(c.wide) != 0 || c.status.Resumed != "" {
		t.Errorf("another slot count resumed %v %v", c.measured, c.wide)
	}
}

// A saved state that cannot be trusted is ignored with a warning naming
// the file and why, never an error: the loop learns again.
func TestLoadLearntRejects(t *testing.T) {
	key := learntKeyFor(4)
	good := func() Learnt {
		return Learnt{Key: key, Saved: time.Unix(1_800_000_000, 0), Width: 4, Measured: map[int]Measure{4: {MS: 7.6, Cycles: 100, N: 4}}, Acceptance: acc(100, 0.7, 0.5)}
	}
	big := make([]Obs, 300)
	for _, c := range []struct {
		name  string
		write func(path string) error
		why   string
	}{
		{"a directory", func(p string) error { return os.Mkdir(p, 0o755) }, "not a regular file"},
		{"too large", func(p string) error { return os.WriteFile(p, bytes.Repeat([]byte(" "), maxCacheBytes+1), 0o644) }, "bytes, more than"},
		{"not JSON", func(p string) error { return os.WriteFile(p, []byte("{\"key\": [[[["), 0o644) }, "corrupt"},
		{"a number past float64", func(p string) error {
			return os.WriteFile(p, []byte(`{"width": 4, "switch_s": 1e999}`), 0o644)
		}, "corrupt"},
		{"another key", saveWith(func(s *Learnt) { s.Key.Models[0].SHA256 = "cc" }), "another engine, GPU, model or slot count"},
		{"width 0", saveWith(func(s *Learnt) { s.Width = 0 }), "width 0 out of"},
		{"accepted more than cycles", saveWith(func(s *Learnt) { s.Acceptance[1].Count = 101 }), "bad acceptance at position 2"},
		{"negative cost", saveWith(func(s *Learnt) { s.Measured[4] = Measure{MS: -1, N: 4} }), "bad measure of width 4"},
		{"no concurrency", saveWith(func(s *Learnt) { s.Measured[4] = Measure{MS: 7, N: 0} }), "bad measure of width 4"},
		{"300 positions", saveWith(func(s *Learnt) { s.Acceptance = big }), "300 acceptance positions"},
		{"avoided width 1000", saveWith(func(s *Learnt) { s.Avoid = []int{1000} }), "avoided width 1000"},
		{"negative switch time", saveWith(func(s *Learnt) { s.SwitchS = -1 }), "switch time"},
		// Values that parse but would poison the decisions: an infinite
		// gain from a cost of 5e-324 ms, an infinite noise, a count that
		// overflows at the next prediction, a position of no cycles.
		{"a cost under a microsecond", saveWith(func(s *Learnt) { s.Measured[4] = Measure{MS: 5e-324, N: 4} }), "bad measure of width 4"},
		{"a spread above the cost", saveWith(func(s *Learnt) { s.Measured[4] = Measure{MS: 7, SE: 1e300, N: 4} }), "bad measure of width 4"},
		{"a prediction count at its limit", saveWith(func(s *Learnt) { s.Prediction.N = math.MaxInt }), "a bad prediction error"},
		{"a huge prediction error", saveWith(func(s *Learnt) { s.Prediction.RMS = 1e200 }), "a bad prediction error"},
		{"a position of no cycles", saveWith(func(s *Learnt) { s.Acceptance[0] = Obs{} }), "bad acceptance at position 1"},
		{"no time", saveWith(func(s *Learnt) { s.Saved = time.Time{} }), "no time saved"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := c.write(learntPath(dir, key)); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if s, ok := LoadLearnt(dir, key, slog.New(slog.NewTextHandler(&buf, nil))); ok {
				t.Fatalf("loaded %+v", s)
			}
			if out := buf.String(); !strings.Contains(out, "ignoring the saved adaptation state") || !strings.Contains(out, c.why) ||
				!strings.Contains(out, filepath.Base(learntPath(dir, key))) {
				t.Errorf("warning %q, want the file and %q", out, c.why)
			}
		})
	}
	// The good one loads, and a missing file is a quiet miss.
	dir := t.TempDir()
	if err := SaveLearnt(dir, good()); err != nil {
		t.Fatal(err)
	}
	if _, ok := LoadLearnt(dir, key, nil); !ok {
		t.Error("a good state did not load")
	}
	var buf bytes.Buffer
	if _, ok := LoadLearnt(t.TempDir(), key, slog.New(slog.NewTextHandler(&buf, nil))); ok || buf.Len() > 0 {
		t.Errorf("missing file: ok %v, log %q", ok, buf.String())
	}
}

// saveWith writes a good state changed by f, bypassing validation.
func saveWith(f func(*Learnt)) func(path string) error {
	return func(path string) error {
		s := Learnt{Key: learntKeyFor(4), Saved: time.Unix(1_800_000_000, 0), Width: 4, Measured: map[int]Measure{4: {MS: 7.6, Cycles: 100, N: 4}}, Acceptance: acc(100, 0.7, 0.5)}
		s.Key.Models = append([]ModelFile(nil), s.Key.Models...)
		f(&s)
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		return os.WriteFile(path, b, 0o644)
	}
}

// A cache that cannot be written is said once, not at every save (the
// errors name a new temporary file each time), and serving goes on.
func TestSaveLearntFailureSaidOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		dir  func(t *testing.T) string
	}{
		{"the cache is a file", func(t *testing.T) string {
			f := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return f
		}},
		{"a directory where the state goes", func(t *testing.T) string {
			d := t.TempDir()
			if err := os.MkdirAll(filepath.Join(learntPath(d, learntKeyFor(4)), "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			return d
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			now := time.Unix(1_800_000_000, 0)
			l := learntLoop(t, c.dir(t), learntKeyFor(4), slog.New(slog.NewTextHandler(&buf, nil)))
			l.d.Now = func() time.Time { return now }
			l.measured[4] = Measure{MS: 7, N: 4}
			for i := 1; i <= 3; i++ {
				l.status.Decisions = i
				now = now.Add(learntEvery)
				l.saveLearnt(false)
			}
			if n := strings.Count(buf.String(), "could not save the adaptation state"); n != 1 {
				t.Errorf("said %d times:\n%s", n, buf.String())
			}
		})
	}
}

// Positions saved over fewer cycles than this loop decides on (a run with
// a lower min_cycles) are not resumed: they would hold every decision at
// "too few cycles", and no exploration would ever refill them.
func TestResumeDropsThinPositions(t *testing.T) {
	dir := t.TempDir()
	a := learntLoop(t, dir, learntKeyFor(4), quietLog())
	a.measured[4] = Measure{MS: 7, N: 4}
	a.wide = Acceptance{{Count: 900, Cycles: 1000}, {Count: 800, Cycles: 1000}, {Count: 30, Cycles: 50}, {Count: 900, Cycles: 1000}}
	a.status.Decisions = 1
	a.saveLearnt(true)
	b := learntLoop(t, dir, learntKeyFor(4), quietLog())
	b.cfg.MinCycles = 100
	b.resume()
	if len(b.wide) != 2 {
		t.Errorf("resumed %d positions %v, want the 2 before the thin one", len(b.wide), b.wide)
	}
}

// The first save says where the state is, once: an operator looking for
// what a restart resumes from finds the file in the log.
func TestFirstSaveSaysWhere(t *testing.T) {
	dir := t.TempDir()
	var buf strings.Builder // saveLearnt runs on the test's goroutine
	l := learntLoop(t, dir, learntKeyFor(4), slog.New(slog.NewTextHandler(&buf, nil)))
	l.measured = map[int]Measure{4: {MS: 5, Cycles: 1000, N: 4}}
	for d := 1; d <= 3; d++ {
		l.status.Decisions = d
		l.saveLearnt(true)
	}
	if n := strings.Count(buf.String(), "what was learnt is saved"); n != 1 || !strings.Contains(buf.String(), learntPath(dir, learntKeyFor(4))) {
		t.Errorf("%d lines saying where (want 1, naming the file):\n%s", n, buf.String())
	}
}
