package evidence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// The rule per bucket (docs/schedule.md, "How a bucket is earned"): a load
// sweep measures every arm at every level on several fresh engines, and a
// level's run is one window of the aggregate rate on one engine, its Round
// the engine's number. The bootstrap's units are then engines, so the
// comparison resamples whole engines: the spread between fresh engines of
// one configuration enters it, and runs of one engine are never taken as
// independent draws.

// MinEngines is the floor of fresh engines behind an arm at a level: with
// one, the spread between engines is assumed, not measured.
const MinEngines = 2

// FewEngines says what a bootstrap over n engines per width can show
// when n is small, "" when it can show more. Resampling two engines draws
// from 3 distinct sets, so a P of 0.95 or more then says only that the
// width's median window beat the default's on each engine: chance alone
// gives that 1 time in 4 for each width compared, and more often when
// several widths are. On the H200 a tune over two engines earned width 3
// at one client with P 1.000 on a 2.3 % gain, inside the 3.8 % spread
// between engines (docs/benchmark_results/h200-follow-2026-12-05.md).
func FewEngines(n int) string {
	if n != 2 {
		return ""
	}
	return "with 2 engines per width, a width earns a bucket when it beat the default on both engines, which chance alone gives 1 time in 4 for each width compared (more often with several widths); 3 or more engines (--engines, default 3) make the evidence stronger"
}

// The ways a bucket's width is earned (record.LevelVerdict.From).
const (
	FromMeasured = "measured" // a speculative width beat the default
	FromClassic  = "classic"  // classic (width 1) beat the default
	FromDefault  = "default"  // nothing beat the default: its width stands
)

// Engines is how many distinct engines (Run.Round) the arm's measured,
// successful runs came from.
func Engines(a *record.Arm) int {
	seen := map[int]bool{}
	for j := range a.Runs {
		if r := &a.Runs[j]; r.Measured() {
			seen[r.Round] = true
		}
	}
	return len(seen)
}

// EngineSpread is the between-engine spread of one level's arms: per
// measured arm, the median rate of each of its engines and their range
// over the arm's median.
func EngineSpread(arms []record.Arm) record.Spread {
	var sp record.Spread
	var rels []float64
	for i := range arms {
		a := &arms[i]
		if a.Status != record.StatusOK {
			continue
		}
		byEngine := map[int][]float64{}
		var order []int
		for j := range a.Runs {
			if r := &a.Runs[j]; r.Measured() {
				if _, ok := byEngine[r.Round]; !ok {
					order = append(order, r.Round)
				}
				byEngine[r.Round] = append(byEngine[r.Round], r.TokPerS)
			}
		}
		if len(order) == 0 {
			continue
		}
		slices.Sort(order)
		meds := make([]float64, len(order))
		for k, e := range order {
			meds[k] = Median(byEngine[e])
		}
		as := record.ArmSpread{Label: a.Label, Medians: meds}
		if m := Median(meds); m > 0 && len(meds) > 1 {
			as.Rel = (slices.Max(meds) - slices.Min(meds)) / m
			rels = append(rels, as.Rel)
		}
		sp.Engines = max(sp.Engines, len(order))
		sp.ByArm = append(sp.ByArm, as)
	}
	if len(rels) > 0 {
		sp.MaxRel, sp.MedianRel = slices.Max(rels), Median(rels)
	}
	return sp
}

// Bucket applies the rule to one level (rec is the level as a one-level
// record, record.Record.AtLevel): rank classic (as width 1) and every
// measured width other than the default's by median; the first, in rank
// order, whose median is above the default's, that ran on at least
// MinEngines engines (as did the default), and that beats the default with
// probability >= Level by the bootstrap over engines earns the bucket.
// Otherwise the default's width stands. An error is the context's.
func Bucket(ctx context.Context, rec *record.Record) (record.LevelVerdict, error) {
	ev := Of(rec)
	def := ev.Default
	if def == nil {
		return record.LevelVerdict{From: FromDefault, Why: "the level has no default arm: nothing to compare with"}, nil
	}
	v := record.LevelVerdict{Width: def.Width, From: FromDefault}
	if def.Status != record.StatusOK {
		v.Why = fmt.Sprintf("the default (width %d) did not measure at this load, so nothing was compared with it; the default's width stands", def.Width)
		return v, nil
	}
	if n := Engines(def.Arm); n < MinEngines {
		v.Why = fmt.Sprintf("the default (width %d) ran on %d engine(s), below the floor of %d: the spread between engines is unmeasured, so the default's width stands", def.Width, n, MinEngines)
		return v, nil
	}
	var why []string
	for _, c := range bucketCandidates(ev, def.RanWidth()) {
		w := candWidth(c)
		if !(c.Stats.Median > def.Stats.Median) {
			break // ranked: no later candidate is above the default either
		}
		if n := Engines(c.Arm); n < MinEngines {
			why = append(why, fmt.Sprintf("width %d ran on %d engine(s), below the floor of %d", w, n, MinEngines))
			continue
		}
		cmp, err := CompareArms(ctx, c.Arm, def.Arm, DefaultLabel(def.Arm))
		if err != nil {
			return v, err
		}
		if cmp == nil {
			why = append(why, fmt.Sprintf("width %d shares no engine round with the default, so the bootstrap cannot pair them", w))
			continue
		}
		if !SureOverDefault(cmp) {
			why = append(why, fmt.Sprintf("width %d beats the default with probability %.3f, below %.2f (ratio %.3f)", w, cmp.PBetter, Level, cmp.Ratio))
			continue
		}
		v.Width, v.Arm, v.VsDefault = w, c.Label, cmp
		v.From = FromMeasured
		if w == schedule.Off {
			v.From = FromClassic
		}
		v.Why = fmt.Sprintf("%s beats the default (width %d) at this load with probability %.3f (ratio %.3f, 95%% interval %.3f-%.3f, engines resampled)",
			widthName(w), def.RanWidth(), cmp.PBetter, cmp.Ratio, cmp.Lo, cmp.Hi)
		return v, nil
	}
	v.Why = fmt.Sprintf("no width beats the default (width %d) at this load with probability %.2f, so its width stands", def.RanWidth(), Level)
	if len(why) > 0 {
		v.Why += ": " + strings.Join(why, "; ")
	}
	return v, nil
}

// bucketCandidates are classic and every measured width but the default's,
// best median first (ties: the smaller width, classic first).
func bucketCandidates(ev *Evidence, defWidth int) []*Arm {
	var out []*Arm
	if c := ev.classicOK(); c != nil {
		out = append(out, c)
	}
	for w, a := range ev.rep {
		if w != defWidth {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b *Arm) int {
		switch {
		case a.Stats.Median > b.Stats.Median:
			return -1
		case a.Stats.Median < b.Stats.Median:
			return 1
		}
		return candWidth(a) - candWidth(b)
	})
	return out
}

// candWidth is a candidate's width in schedule terms: classic is 1 (off).
func candWidth(a *Arm) int {
	if a.Kind == record.KindClassic {
		return schedule.Off
	}
	return a.RanWidth()
}

func widthName(w int) string {
	if w == schedule.Off {
		return "classic (width 1, speculation off)"
	}
	return fmt.Sprintf("width %d", w)
}

// EarnSchedule turns the levels' widths into a schedule: level i's width
// from that level (the first from 1) up to the next level, the last open;
// neighbours of one width merged. levels ascend; widths[i] is level i's.
func EarnSchedule(levels, widths []int, source string) (schedule.Schedule, error) {
	if len(levels) == 0 || len(levels) != len(widths) {
		return nil, fmt.Errorf("a schedule needs one width per level (%d levels, %d widths)", len(levels), len(widths))
	}
	s := make(schedule.Schedule, len(levels))
	for i, l := range levels {
		b := schedule.Bucket{Lo: l, Width: widths[i], Source: source}
		if i == 0 {
			b.Lo = 1
		}
		if i+1 < len(levels) {
			b.Hi = levels[i+1] - 1
		}
		s[i] = b
	}
	s = s.Merge()
	return s, s.Validate()
}

// ErrNothingMeasured is a sweep in which no arm of any level measured:
// each bucket's fallback to the default would rest on nothing (tune wrote
// it as an entry, and exited 0, when every engine failed to start).
var ErrNothingMeasured = errors.New("no engine of any width started and served at any level")

// Earn recomputes every level's spread and bucket and the schedule they
// earn, from the raw runs. An error is the context's, a sweep in which
// nothing measured (ErrNothingMeasured), or one whose levels cannot make
// a schedule.
func Earn(ctx context.Context, rec *record.Record) ([]record.Spread, []record.LevelVerdict, *record.Earned, error) {
	n := len(rec.Levels)
	spreads, verdicts := make([]record.Spread, n), make([]record.LevelVerdict, n)
	levels, widths := make([]int, n), make([]int, n)
	measured := false
	for i := range rec.Levels {
		measured = measured || slices.ContainsFunc(rec.Levels[i].Arms, func(a record.Arm) bool { return a.Status == record.StatusOK })
		spreads[i] = EngineSpread(rec.Levels[i].Arms)
		v, err := Bucket(ctx, rec.AtLevel(i))
		if err != nil {
			return nil, nil, nil, err
		}
		verdicts[i] = v
		levels[i], widths[i] = rec.Levels[i].Concurrency, v.Width
	}
	if !measured {
		return spreads, verdicts, nil, ErrNothingMeasured
	}
	s, err := EarnSchedule(levels, widths, FromMeasured)
	if err != nil {
		return spreads, verdicts, nil, fmt.Errorf("the levels earn no schedule: %w", err)
	}
	return spreads, verdicts, &record.Earned{Triples: s.Triples(), Text: s.String(), Describe: s.Describe()}, nil
}

// LevelDisagreements recomputes a load sweep's figures from its raw runs
// and names every stored one that differs: each level's arm figures, its
// spread, its bucket's width, and the earned schedule. An error is the
// context's.
func LevelDisagreements(ctx context.Context, rec *record.Record) ([]string, error) {
	if len(rec.Levels) == 0 {
		return nil, nil
	}
	spreads, verdicts, earned, err := Earn(ctx, rec)
	if err != nil && ctx.Err() != nil {
		return nil, err
	}
	var out []string
	for i := range rec.Levels {
		l := &rec.Levels[i]
		at := fmt.Sprintf("level %d", l.Concurrency)
		lv := Of(rec.AtLevel(i))
		lv.writtenBy = WrittenBy(rec)
		for _, d := range lv.Disagreements() {
			out = append(out, at+": "+d)
		}
		if !same(l.Spread.MaxRel, spreads[i].MaxRel) || l.Spread.Engines != spreads[i].Engines {
			out = appendDiff(out, WrittenBy(rec), at, "its raw runs", []string{field("spread.max_rel", l.Spread.MaxRel, spreads[i].MaxRel), field("spread.engines", float64(l.Spread.Engines), float64(spreads[i].Engines))})
		}
		if l.Bucket.Width != verdicts[i].Width || l.Bucket.From != verdicts[i].From {
			out = append(out, fmt.Sprintf("%s: stored bucket width %d (%s) disagrees with the rule applied to its raw runs (width %d, %s); regenerate the record with %s",
				at, l.Bucket.Width, l.Bucket.From, verdicts[i].Width, verdicts[i].From, WrittenBy(rec)))
		}
	}
	switch {
	case err != nil:
		out = append(out, err.Error())
	case rec.Earned == nil:
		out = append(out, "the record stores no earned schedule; its levels earn "+earned.Text)
	case !slices.EqualFunc(rec.Earned.Triples, earned.Triples, slices.Equal):
		out = append(out, fmt.Sprintf("the stored earned schedule %s disagrees with the one its raw runs earn (%s); regenerate the record with %s", rec.Earned.Text, earned.Text, WrittenBy(rec)))
	}
	return out, nil
}
