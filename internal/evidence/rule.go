package evidence

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/speclaunch/speclaunch/internal/quote"
	"github.com/speclaunch/speclaunch/internal/record"
)

// The rules a width is judged by (Fail.Rule).
const (
	RuleMeasured = "measured" // the record measured the width
	RuleClassic  = "classic"  // it beats classic with disjoint ranges
	RuleDefault  = "default"  // it beats the engine's default
	RuleRecord   = "record"   // the record may back an entry at all
)

// Fail is one rule a width breaks in one record.
type Fail struct {
	Rule string
	Msg  string
}

// Judgement is one width against the rule in one record.
type Judgement struct {
	Width int
	// Arm stands for the width (nil when the record did not measure it).
	Arm *Arm
	// VsDefault is the bootstrap of the arm against the default arm,
	// recomputed from the raw runs (nil when they could not be compared).
	VsDefault *record.Comparison
	Fails     []Fail
}

// Passes reports whether the width broke no rule.
func (j Judgement) Passes() bool { return len(j.Fails) == 0 }

// Messages are the fails' messages.
func (j Judgement) Messages() []string {
	out := make([]string, len(j.Fails))
	for i, f := range j.Fails {
		out[i] = f.Msg
	}
	return out
}

// Judge applies every rule of docs/policy.md to width w in this record:
// it was measured; its arm beats classic with disjoint ranges (BeatsClassic);
// it is not the default arm's width, beats the default's median, and beats
// the default with probability >= Level by the bootstrap of the raw runs;
// and the record may back an entry (RecordFails). Only the context ending
// stops it early, with the context's error.
func (e *Evidence) Judge(ctx context.Context, w int) (Judgement, error) {
	j := Judgement{Width: w, Arm: e.Width(w)}
	if j.Arm == nil {
		j.Fails = append(j.Fails, Fail{RuleMeasured, fmt.Sprintf("width %d has no measured arm in the record (measured widths: %s); an entry's width must be one the record measured", w, e.measuredWidths())})
	} else {
		if msg := e.classicFail(j.Arm); msg != "" {
			j.Fails = append(j.Fails, Fail{RuleClassic, msg})
		}
		c, msgs, err := e.defaultFails(ctx, j.Arm)
		if err != nil {
			return j, err
		}
		j.VsDefault = c
		for _, m := range msgs {
			j.Fails = append(j.Fails, Fail{RuleDefault, m})
		}
	}
	for _, m := range e.RecordFails() {
		j.Fails = append(j.Fails, Fail{RuleRecord, m})
	}
	return j, nil
}

// BeatsClassic applies the margin to arm a of this record.
func (e *Evidence) BeatsClassic(a *Arm) bool { return e.classicFail(a) == "" }

// classicFail says why a does not beat classic ("" when it does).
func (e *Evidence) classicFail(a *Arm) string {
	c := e.classicOK()
	if c == nil {
		return "the record has no classic arm that measured: there is nothing to beat"
	}
	if a.Status != record.StatusOK {
		return fmt.Sprintf("arm %s is %s, not a measurement that can beat classic", quote.Quoted(a.Label, 0), a.Status)
	}
	if s := classicShortfall(a.Stats, c.Stats); s != "" {
		return fmt.Sprintf("width %d (arm %s) does not beat classic with disjoint ranges: %s", a.RanWidth(), quote.Quoted(a.Label, 0), s)
	}
	return ""
}

// DefaultLabel is how comparisons with the default arm name it.
func DefaultLabel(def *record.Arm) string { return fmt.Sprintf("default (width %d)", def.RanWidth()) }

// defaultFails applies "beats the default" to a: the comparison it rests
// on (nil when none could be made) and why a fails it (none: it passes).
func (e *Evidence) defaultFails(ctx context.Context, a *Arm) (*record.Comparison, []string, error) {
	def, w := e.Default, a.RanWidth()
	switch {
	case def == nil || def.Status != record.StatusOK:
		return nil, []string{fmt.Sprintf("the record has no default arm that measured, so width %d was never compared with the engine's default", w)}, nil
	case def.RanWidth() == w:
		return nil, []string{fmt.Sprintf("width %d is the default arm's width: an entry would change nothing against the engine's default", w)}, nil
	}
	var fails []string
	if !(a.Stats.Median > def.Stats.Median) {
		fails = append(fails, fmt.Sprintf("width %d does not beat the default's median (%.2f against %.2f for width %d)", w, a.Stats.Median, def.Stats.Median, def.RanWidth()))
	}
	c, err := CompareArms(ctx, a.Arm, def.Arm, DefaultLabel(def.Arm))
	switch {
	case err != nil:
		return nil, nil, err
	case c == nil:
		fails = append(fails, fmt.Sprintf("width %d cannot be compared with the default (width %d) by the bootstrap: the record keeps no raw runs of both in a shared round", w, def.RanWidth()))
	case !SureOverDefault(c):
		fails = append(fails, fmt.Sprintf("width %d beats the default (width %d) with probability %.3f, below %.2f (median ratio %.3f, 95%% interval %.3f-%.3f)",
			w, def.RanWidth(), c.PBetter, Level, c.Ratio, c.Lo, c.Hi))
	}
	return c, fails, nil
}

// SureOverDefault is the margin over the default: a share of resamples
// of at least Level in which the width's median is above the default's.
func SureOverDefault(c *record.Comparison) bool { return c.PBetter >= Level }

// RecordFails are the reasons this record cannot back an entry whatever
// its figures: it is simulated, incomplete, or transcribed without naming
// its source.
func (e *Evidence) RecordFails() []string {
	var out []string
	r := e.Rec
	if r.Simulated {
		out = append(out, "the record is simulated: a record from the sim engine never backs an entry; measure on a real engine and GPU")
	}
	if !r.Complete {
		out = append(out, "the record is incomplete (the bench was interrupted); re-run it to completion")
	}
	if r.Transcribed != nil && strings.TrimSpace(r.Transcribed.Source) == "" {
		out = append(out, "the record is transcribed but names no source; a transcription is accepted only with transcribed.source set")
	}
	return out
}

// Ranked is the record's measured widths (their representative arms with
// a range: n >= 2), best first: higher median, then the smaller width.
func (e *Evidence) Ranked() []*Arm {
	var out []*Arm
	for _, a := range e.rep {
		if a.Stats.N >= 2 {
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
		return a.RanWidth() - b.RanWidth()
	})
	return out
}

func (e *Evidence) measuredWidths() string {
	ws := make([]int, 0, len(e.rep))
	for w := range e.rep {
		ws = append(ws, w)
	}
	if len(ws) == 0 {
		return "none"
	}
	slices.Sort(ws)
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = strconv.Itoa(w)
	}
	return strings.Join(s, ", ")
}
