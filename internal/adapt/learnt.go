package adapt

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// What the loop learnt of one engine build, GPU, model pair (by content)
// and slot count is saved beside the verify-cost curve, under the same
// key, so that a launcher restarted on the same pair resumes it instead of
// exploring again: each width's measured ms per cycle, the acceptance by
// draft position, the widths undone, the running prediction error and the
// switch time. Each width's own counts and the trials are not kept: they
// belong to the traffic of the moment, and the first pool after a restart
// is tested against nothing. Another key (another pair, GPU, build or slot
// count) has its own file; a file that does not pass Learnt.valid is
// ignored with a warning and the loop learns again.

// Learnt is the saved state (file adapt-learnt-<key id>.json).
type Learnt struct {
	Key   CacheKey  `json:"key"`
	Saved time.Time `json:"saved"`
	// Width is the width the loop had chosen when it saved (the home
	// width during an exploration or a trial).
	Width      int             `json:"width"`
	Measured   map[int]Measure `json:"measured"`
	Acceptance []Obs           `json:"acceptance"`
	Avoid      []int           `json:"avoid,omitempty"`
	Prediction PredictionError `json:"prediction"`
	SwitchS    float64         `json:"switch_s,omitempty"`
}

// Bounds of a valid Learnt: far past anything an engine serves, near
// enough that a hostile file cannot make the loop allocate or loop much.
const (
	learntMaxWidth = 256
	learntMaxN     = 4096
	// learntMaxPredictions bounds the prediction count, so that its
	// running means cannot overflow.
	learntMaxPredictions = 1 << 30
	// learntEvery is the least time between two saves while adapting.
	learntEvery = 10 * time.Second
)

func learntPath(dir string, k CacheKey) string {
	return filepath.Join(dir, "adapt-learnt-"+k.id()+".json")
}

// valid says what is wrong with a loaded Learnt for key k, or "".
func (s Learnt) valid(k CacheKey) string {
	switch {
	case !sameKey(s.Key, k):
		return "written for another engine, GPU, model or slot count"
	case s.Width < 1 || s.Width > learntMaxWidth:
		return fmt.Sprintf("width %d out of 1-%d", s.Width, learntMaxWidth)
	case len(s.Acceptance) > learntMaxWidth:
		return fmt.Sprintf("%d acceptance positions, more than %d", len(s.Acceptance), learntMaxWidth)
	case len(s.Measured) > learntMaxWidth || len(s.Avoid) > learntMaxWidth:
		return "more widths than an engine serves"
	case s.Saved.IsZero():
		return "no time saved"
	case !in(s.SwitchS, 0, 1e5):
		return fmt.Sprintf("switch time %v s", s.SwitchS)
	case s.Prediction.N < 0 || s.Prediction.N > learntMaxPredictions || !in(s.Prediction.MeanAbs, 0, 10) ||
		!in(s.Prediction.RMS, 0, 10) || !in(s.Prediction.Last, -10, 10):
		return "a bad prediction error"
	}
	for w, m := range s.Measured {
		// A cycle takes between a microsecond and 1000 s; its standard
		// error is at most the cycle.
		if w < 1 || w > learntMaxWidth || !in(m.MS, 1e-3, 1e6) || !in(m.Cycles, 0, 1e15) || !in(m.SE, 0, m.MS) ||
			m.N < 1 || m.N > learntMaxN {
			return fmt.Sprintf("bad measure of width %d", w)
		}
	}
	for k, o := range s.Acceptance {
		if !in(o.Cycles, 1, 1e15) || !in(o.Count, 0, o.Cycles) {
			return fmt.Sprintf("bad acceptance at position %d", k+1)
		}
	}
	for _, w := range s.Avoid {
		if w < 1 || w > learntMaxWidth {
			return fmt.Sprintf("avoided width %d out of 1-%d", w, learntMaxWidth)
		}
	}
	return ""
}

// in says lo ≤ x ≤ hi for a finite x (NaN is in no range).
func in(x, lo, hi float64) bool { return x >= lo && x <= hi && !math.IsInf(x, 0) }

// LoadLearnt returns the saved state for k. A missing file is a miss; one
// that is not a regular file, too large, corrupt, for another key or out
// of bounds is a miss with a warning, never an error.
func LoadLearnt(dir string, k CacheKey, log *slog.Logger) (Learnt, bool) {
	var s Learnt
	warn, ok := readCacheJSON(learntPath(dir, k), &s, log, "adapt: ignoring the saved adaptation state; learning again")
	if !ok {
		return Learnt{}, false
	}
	if why := s.valid(k); why != "" {
		warn(why)
		return Learnt{}, false
	}
	return s, true
}

// SaveLearnt writes s atomically under its key.
func SaveLearnt(dir string, s Learnt) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("adaptation state: %w", err)
	}
	return writeCacheFile(dir, learntPath(dir, s.Key), b)
}

// learnt is what the loop knows now, to save.
func (l *Loop) learnt(key CacheKey) Learnt {
	w := l.width
	switch {
	case l.home > 0:
		w = l.home
	case l.trial && l.check != nil:
		w = l.check.from // a trial is checked against the width kept
	}
	return Learnt{Key: key, Saved: l.d.Now().UTC(), Width: max(1, w), Measured: maps.Clone(l.measured),
		Acceptance: slices.Clone(l.acceptanceAll()), Avoid: l.avoided(),
		Prediction: l.status.Prediction, SwitchS: l.switchS}
}

// acceptanceAll is the acceptance at every position observed: this
// engine's where it has them, the widest observation beyond.
func (l *Loop) acceptanceAll() Acceptance {
	if l.width < 2 || l.base.Cycles+l.waiting().pool.Cycles == 0 {
		return l.wide
	}
	return l.acceptance()
}

// learntKey is the key the state is saved under, and whether this loop
// saves at all: a cache directory and key, and the first pair seen (the
// key names its files).
func (l *Loop) learntKey() (CacheKey, bool) {
	if !l.cacheable() {
		return CacheKey{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pair != "" && l.firstPair() != "" && l.pair != l.firstPair() {
		return CacheKey{}, false
	}
	return l.cacheKey(), true
}

// resume seeds a loop that has learnt nothing yet with the saved state of
// its key, once.
func (l *Loop) resume() {
	if l.resumed || len(l.measured) > 0 || len(l.wide) > 0 {
		return
	}
	l.resumed = true
	key, ok := l.learntKey()
	if !ok {
		return
	}
	s, ok := LoadLearnt(l.d.CacheDir, key, l.d.Log)
	if !ok {
		return
	}
	maps.Copy(l.measured, s.Measured)
	// Positions observed over fewer cycles than this loop decides on are
	// left to an exploration (saved under a lower min_cycles, they would
	// hold every decision at "too few cycles" for good).
	acc := Acceptance(s.Acceptance)
	for k, o := range acc {
		if o.Cycles < l.cfg.MinCycles {
			acc = acc[:k]
			break
		}
	}
	l.wide = acc
	for _, w := range s.Avoid {
		l.avoid[w] = true
	}
	l.status.Prediction, l.switchS = s.Prediction, s.SwitchS
	at := s.Saved.UTC().Format(time.RFC3339)
	l.status.Resumed = at
	ws := make([]string, 0, len(s.Measured))
	for _, w := range slices.Sorted(maps.Keys(s.Measured)) {
		ws = append(ws, fmt.Sprintf("%d@%d", w, s.Measured[w].N))
	}
	l.d.Log.Info("adapt: resuming what an earlier run learnt of this engine, GPU, model pair and slots",
		"saved", at, "was_serving", s.Width, "widths_measured", strings.Join(ws, " "), "positions", len(s.Acceptance))
}

// saveLearnt saves the state when a decision was made since the last save
// and learntEvery has passed, or always when final.
func (l *Loop) saveLearnt(final bool) {
	if l.status.Decisions == l.savedAt || !final && l.d.Now().Sub(l.lastSave) < learntEvery {
		return
	}
	key, ok := l.learntKey()
	if !ok || len(l.measured) == 0 && len(l.wide) == 0 {
		return
	}
	l.savedAt, l.lastSave = l.status.Decisions, l.d.Now()
	err := SaveLearnt(l.d.CacheDir, l.learnt(key))
	switch {
	case err != nil && !l.saveFailing: // once until a save succeeds, not every 10 s
		l.saveFailing = true
		l.d.Log.Warn("adapt: could not save the adaptation state; a restart learns again (said once)", "err", err)
	case err == nil && l.saveFailing:
		l.saveFailing = false
		l.d.Log.Info("adapt: the adaptation state is saved again")
	case err == nil && !l.savedOnce: // where it is, once
		l.d.Log.Info("adapt: what was learnt is saved; a restart on the same engine, GPU, model pair and slots resumes from it", "file", learntPath(l.d.CacheDir, key))
	}
	if err == nil {
		l.savedOnce = true
	}
}

// avoided is the widths undone, with those a re-check under way set aside
// (keepBarred): a stop in the middle of a look does not free them.
func (l *Loop) avoided() []int {
	w := maps.Clone(l.avoid)
	if l.barred != nil {
		maps.Copy(w, l.barred.widths)
	}
	return slices.Sorted(maps.Keys(w))
}
