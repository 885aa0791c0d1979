package adapt

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/defaults"
)

// Rule is the decision rule's settings. Zero fields take the defaults.
type Rule struct {
	// MinCycles is the fewest cycles behind every position used before any
	// decision. 256 keeps the Wilson half-width of one S(k) under about
	// 0.06 at z = 1.96 (0.5 is the worst case: 1.96·√(0.25/256) ≈ 0.061),
	// and a 200-token request at width 4-8 gives 40-120 cycles, so it is a
	// handful of requests.
	MinCycles float64
	// Margin is the predicted gain over the running width below which the
	// loop does not switch (default 3%): a switch costs an engine start and
	// the model's error is a few percent (premise: choices at 0.87-1.00 of
	// the best, median 0.98).
	Margin float64
	// Z is the standard errors of the per-position Wilson bounds (1.96).
	Z float64
	// MaxWidth caps every candidate and exploration (17).
	MaxWidth int
	// TrialBand is how far under the incumbent's predicted rate a width
	// that has not been measured may be predicted and still be measured
	// (a trial, Decision.Trial) before it is judged (default 10%). The
	// model takes S(k) as independent of the running width, and it is
	// not: on the H200 Q4_0 pair 5791L24 width 3 ran 2.50 tokens per
	// cycle where width 8's S predicted 2.23, so a width the model puts up
	// to about 10% under the incumbent can be the better one.
	TrialBand float64
	// Payback is the time over which a switch's predicted gain must repay
	// the throughput it costs (Inputs.SwitchS at the incumbent's rate)
	// (default 10 min, the loop's re-exploration period: a width chosen is
	// served at least that long unless the traffic changes).
	Payback time.Duration
}

// Defaults.
const (
	DefaultMinCycles = defaults.AdaptMinCycles
	DefaultMargin    = defaults.AdaptMargin
	DefaultZ         = 1.96
	DefaultMaxWidth  = defaults.AdaptMaxWidth
	DefaultTrialBand = 0.10
	DefaultPayback   = 10 * time.Minute
)

func (r Rule) withDefaults() Rule {
	if r.MinCycles <= 0 {
		r.MinCycles = DefaultMinCycles
	}
	if r.Margin <= 0 {
		r.Margin = DefaultMargin
	}
	if r.Z <= 0 {
		r.Z = DefaultZ
	}
	if r.MaxWidth < 2 {
		r.MaxWidth = DefaultMaxWidth
	}
	if r.TrialBand <= 0 {
		r.TrialBand = DefaultTrialBand
	}
	if r.Payback <= 0 {
		r.Payback = DefaultPayback
	}
	return r
}

// Inputs is everything one decision reads.
type Inputs struct {
	Running  int        // width serving now; 1 = speculation off
	N        int        // sequences decoding together (≥ 1)
	Acc      Acceptance // S(k) observations; see Acceptance
	Curve    Curve
	Measured map[int]Measure // ms per cycle measured by width
	Rule     Rule
	// Live is how many leading positions of Acc the running engine
	// observed itself (the rest come from an earlier, wider epoch); 0
	// means all of them.
	Live int
	// Home is the width served before an exploration, while the running
	// width is one the loop started to observe rather than chose; 0 (or
	// Running) when not exploring. An exploration width is a measuring
	// device: the rule compares candidates with Home, and goes back to it
	// unless a width beats it by the margin, so that a cost curve that
	// misprices the widths cannot leave the engine at the exploration
	// width by inertia.
	Home int
	// Own is each width's own acceptance: the cycles served at that width
	// (since the traffic last drifted, at this concurrency), counted at
	// the positions it drafts. A width other than the running one with at
	// least a pool's worth of its own (driftPool · MinCycles, 1024 cycles)
	// is judged by its own tokens per cycle, not the model's: S per cycle
	// depends on the width (see Rule.TrialBand). Less is one stretch of
	// the traffic: on the sim matrix's two alternating classes the
	// exploration width 8 measured 581 tok/s over 396 cycles where the
	// model said 455, and the loop settled there instead of going home.
	// The running width is always judged by Acc, whose positions below it
	// are the running engine's own.
	Own map[int]Counts
	// Trials is how many more trials the rule may name (0: none); Tried
	// holds the widths measured by a trial since the last reset, never
	// named again.
	Trials int
	Tried  map[int]bool
	// Avoid holds widths measured worse than the width they replaced
	// (a switch undone, see Check): never chosen again until the traffic
	// drifts.
	Avoid map[int]bool
	// PredErr is the root mean square of the loop's errors on the ms per
	// cycle it predicted for widths it then served (0: none scored). The
	// trial band widens to twice it (Rule.band): on the H200 under 4
	// independent clients a width predicted 15.20 ms a cycle ran 17.49,
	// and width 3, predicted 12 % under classic, ran 15 % over it untried.
	PredErr float64
	// SwitchS is the measured seconds one switch of this engine takes
	// (0: not measured yet). A switch is made only when the predicted
	// gain over Rule.Payback repays it.
	SwitchS float64
}

// Position is one S(k) as logged.
type Position struct {
	K      int     `json:"k"`
	Count  float64 `json:"count"`
	Cycles float64 `json:"cycles"`
	S      float64 `json:"s"`
	Lo     float64 `json:"lo"`
	Hi     float64 `json:"hi"`
}

// Candidate is one width's prediction.
type Candidate struct {
	Width          int     `json:"width"`
	TokensPerCycle float64 `json:"tokens_per_cycle"`
	// TokensFrom says where TokensPerCycle came from: "own" (cycles served
	// at this width: the running width, or one measured earlier, Inputs.Own)
	// or "model" (S(k) observed at other widths).
	TokensFrom string  `json:"tokens_from"`
	Cost       Cost    `json:"cost"`
	TokPerS    float64 `json:"tok_per_s"` // aggregate over the N sequences
}

// Decision is one evaluation of the rule, with everything to log.
type Decision struct {
	Running    int         `json:"running"`
	Choice     int         `json:"choice"` // the width to serve; = Running when staying
	Switch     bool        `json:"switch"`
	Reason     string      `json:"reason"`
	N          int         `json:"concurrency"`
	S          []Position  `json:"s"`
	Candidates []Candidate `json:"candidates"`
	Best       int         `json:"best"`           // the best predicted width, switched to or not
	Home       int         `json:"home,omitempty"` // the width before an exploration, the incumbent while exploring
	Gain       float64     `json:"gain"`           // predicted best / incumbent − 1 (the incumbent: Home while exploring, else Running)
	GainLo     float64     `json:"gain_lo"`        // its lower bound from the S bounds
	Margin     float64     `json:"margin"`
	// Explore is a width past the observed positions that could pay if
	// S stayed at its last observed value; 0 when none.
	Explore int `json:"explore,omitempty"`
	// ExploreIn is how long the loop holds that wider look: past the
	// first exploration it takes one per re-check period (0: now).
	ExploreIn time.Duration `json:"explore_in_ns,omitempty"`
	// Recheck is a wider width that could pay if S stayed at the last
	// position the running engine observes: far positions seen earlier
	// may no longer hold (the traffic changed). The loop acts on it at a
	// bounded rate. 0 when none.
	Recheck int `json:"recheck,omitempty"`
	// Trial is a width not yet measured, predicted within Rule.TrialBand
	// of the width kept, that the loop measures before judging it: the
	// decision then switches there (Switch, Choice = Trial), as an
	// exploration that observes rather than chooses. 0 when none.
	Trial int `json:"trial,omitempty"`
	// NoCost says the rule could not judge the running width: the curve
	// does not cover the rows it verifies at this concurrency (N·Running).
	// The decision then stays and says so; the loop probes those rows, or
	// goes back home from an exploration when they cannot be probed.
	NoCost bool `json:"no_cost,omitempty"`
}

// Decide applies the rule. Candidates are widths 1 (speculation off) to
// the widest the observed positions cover (capped by MaxWidth), plus the
// running width. predicted tok/s(W) = N · tokens/cycle(W) / cost(W), where
// tokens/cycle is 1 + S(1) + … + S(W−1) from Acc, or for a width measured
// earlier (Inputs.Own) its own mean. It switches when the best width's
// predicted gain over the incumbent (the running width, or while exploring
// the width before the exploration, Inputs.Home) is at least Margin and the
// gain's lower bound (see gainBound) is above zero. Ties go to the
// incumbent, then to the narrower. While exploring, no such gain means back
// to Home. A decision that keeps the running width may name a trial: the width not yet measured with the
// highest predicted rate within TrialBand of the running width's.
func Decide(in Inputs) Decision {
	r := in.Rule.withDefaults()
	n := max(1, in.N)
	d := Decision{Running: in.Running, Choice: in.Running, Best: in.Running, N: n, Margin: r.Margin}
	for i, o := range in.Acc {
		lo, hi := o.Bounds(r.Z)
		d.S = append(d.S, Position{K: i + 1, Count: o.Count, Cycles: o.Cycles, S: o.S(), Lo: lo, Hi: hi})
	}
	maxW := min(r.MaxWidth, len(in.Acc)+1)
	if maxW < 2 {
		d.Reason = "no acceptance observed yet"
		return d
	}
	if c := in.Acc.MinCycles(max(maxW, in.Running)); c < r.MinCycles {
		d.Reason = fmt.Sprintf("too few cycles: %.0f of the %.0f needed", c, r.MinCycles)
		return d
	}
	inc := in.Running // the incumbent: what a switch must beat
	if in.Home >= 1 && in.Home != in.Running {
		inc = in.Home
	}
	var rate map[int]float64
	var cost map[int]Cost
	var own map[int]Counts
	d.Candidates, rate, cost, own = candidates(in, r, n, maxW, inc)
	if _, ok := rate[in.Running]; !ok {
		if _, covered := in.Curve.At(n * in.Running); covered {
			d.Reason = fmt.Sprintf("no prediction for the running width %d at %d sequences", in.Running, n)
			return d
		}
		d.Reason = fmt.Sprintf("no cost for the running width %d at %d sequences (the probed curve does not cover %d rows)", in.Running, n, n*in.Running)
		d.NoCost = true
		return d
	}
	if _, ok := rate[inc]; !ok {
		inc = in.Running // no cost for the width before the exploration: judge from here
	}
	if inc != in.Running {
		d.Home = inc
	}
	best := inc
	for _, c := range d.Candidates { // ascending width: ties keep the narrower
		if in.Avoid[c.Width] && c.Width != inc {
			continue
		}
		if c.TokPerS > rate[best] {
			best = c.Width
		}
	}
	d.Best = best
	d.Gain = rate[best]/rate[inc] - 1
	if best != inc {
		// A modelled cost is taken at the end of its interval that hurts
		// the best: a fitted drafting cost is an estimate, not a measure.
		cb := cost[best].MS + r.Z*cost[best].SE
		ci := math.Max(cost[inc].MS-r.Z*cost[inc].SE, cost[inc].VerifyMS)
		d.GainLo = gainBound(in, r.Z, own, best, inc, cb, ci) / (rate[inc] / (1000 * float64(n)))
	}
	d.Explore = explore(in.Acc, in, r, n, rate[best])
	if in.Live > 0 && in.Live < len(in.Acc) {
		d.Recheck = explore(in.Acc[:in.Live], in, r, n, rate[best])
	}
	chosen := d.verdict(in, r, inc)
	if !chosen && inc != in.Running {
		// Nothing beat the width before the exploration by the margin.
		d.Choice = inc
		d.Reason = fmt.Sprintf("back from exploration width %d to width %d: %s", in.Running, inc, d.Reason)
	}
	d.Switch = d.Choice != in.Running
	d.nameTrial(in, r, maxW, rate)
	return d
}

// band is the trial band: TrialBand, or twice the loop's measured
// prediction error where that is wider (Inputs.PredErr), at most 50 %.
func (r Rule) band(in Inputs) float64 {
	return math.Max(r.TrialBand, math.Min(0.5, 2*in.PredErr))
}

// nameTrial names a trial, only from a decision that keeps the running
// width: not one that switches (to a better width, or back home from an
// exploration or a trial), and not while a wider exploration is asked for
// (it observes more positions, which the trial's prediction reads). A
// decision that ends an exploration or a trial by choosing the width it
// observed may name one: the width kept is then the incumbent.
func (d *Decision) nameTrial(in Inputs, r Rule, maxW int, rate map[int]float64) {
	if in.Trials <= 0 || d.Switch || d.Explore != 0 {
		return
	}
	t := trial(in, r, d.Candidates, maxW, rate)
	if t > 0 && in.SwitchS > 0 {
		// A trial gains at most the band over its prediction (the
		// model's stated error) and costs up to two switches (there and
		// back); on a target that loads in tens of seconds a trial of a
		// width predicted slower does not repay them (on the H200 a 20 GB
		// target's switch took 9.5-10.3 s).
		if up := rate[t]/rate[in.Running] - 1 + r.band(in); up*r.Payback.Seconds() < 2*in.SwitchS {
			d.Reason += fmt.Sprintf("; no trial of width %d: at most %+.1f%% does not repay two %.1fs switches within %s", t, 100*up, in.SwitchS, r.Payback)
			return
		}
	}
	if d.Trial = t; d.Trial > 0 {
		d.Reason = fmt.Sprintf("trial width %d: predicted %+.1f%% against width %d, within the %.0f%% band; measuring it (%s)",
			d.Trial, 100*(rate[d.Trial]/rate[in.Running]-1), in.Running, 100*r.band(in), d.Reason)
		d.Choice, d.Switch = d.Trial, true
	}
}

// candidates predicts each width from 1 to maxW (and the running and the
// incumbent widths): its tokens per cycle (the model's, or a width's own
// counts), its cost and its rate; own holds the widths read from their
// own counts (not the running one).
func candidates(in Inputs, r Rule, n, maxW, inc int) (cands []Candidate, rate map[int]float64, cost map[int]Cost, own map[int]Counts) {
	rate, cost, own = map[int]float64{}, map[int]Cost{}, map[int]Counts{}
	for w := 1; w <= max(maxW, in.Running, inc); w++ {
		if w > maxW && w != in.Running && w != inc {
			continue
		}
		t, ok1 := in.Acc.TokensPerCycle(w)
		from := "model"
		if o, ok := in.Own[w]; ok && w >= 2 && w != in.Running && o.Cycles >= driftPool*r.MinCycles && len(o.AtLeast) >= w-1 {
			t, ok1, from = o.TokensPerCycle(), true, "own"
			own[w] = o
		} else if w == in.Running {
			from = "own" // Acc's positions below the running width are its own
		}
		c, ok2 := CycleCost(in.Curve, in.Measured, w, n)
		if !ok1 || !ok2 || c.MS <= 0 {
			continue
		}
		rate[w], cost[w] = 1000*float64(n)*t/c.MS, c
		cands = append(cands, Candidate{Width: w, TokensPerCycle: t, TokensFrom: from, Cost: c, TokPerS: rate[w]})
	}
	return cands, rate, cost, own
}

// verdict applies rules 2 and 3 to the best width against the incumbent
// inc: the reason, and whether the best is chosen.
func (d *Decision) verdict(in Inputs, r Rule, inc int) bool {
	best := d.Best
	switch {
	case best == inc:
		d.Reason = fmt.Sprintf("width %d is predicted best", best)
	case d.Gain < r.Margin:
		d.Reason = fmt.Sprintf("width %d predicted %+.1f%%, under the %.0f%% margin", best, 100*d.Gain, 100*r.Margin)
	case d.GainLo <= 0:
		d.Reason = fmt.Sprintf("width %d predicted %+.1f%% but its lower bound %+.1f%% is not above zero: more cycles needed", best, 100*d.Gain, 100*d.GainLo)
	case in.SwitchS > 0 && best != in.Running && d.Gain*r.Payback.Seconds() < in.SwitchS:
		d.Reason = fmt.Sprintf("width %d predicted %+.1f%% does not repay a %.1fs switch within %s", best, 100*d.Gain, in.SwitchS, r.Payback)
	default:
		d.Choice = best
		d.Reason = fmt.Sprintf("width %d predicted %+.1f%% (lower bound %+.1f%%) over width %d", best, 100*d.Gain, 100*d.GainLo, inc)
		return true
	}
	return false
}

// trial picks the width to measure before judging it: one not tried
// before, 2 ≤ t ≤ maxW (within the observed positions), predicted at
// least (1 − TrialBand) of the running width's rate; the highest
// predicted, ties to the narrower. 0 when none. A width with own
// acceptance is tried again only when a pool's worth of it (driftPool ·
// MinCycles) measured better than the running width, under the margin:
// a trial kept on a lucky stretch of the traffic left it.
func trial(in Inputs, r Rule, cands []Candidate, maxW int, rate map[int]float64) int {
	pick := 0
	for _, c := range cands { // ascending width
		w := c.Width
		if w < 2 || w > maxW || w == in.Running || w == in.Home || in.Tried[w] || in.Avoid[w] {
			continue
		}
		if o := in.Own[w].Cycles; o > 0 && (o < driftPool*r.MinCycles || c.TokensFrom != "own" || c.TokPerS <= rate[in.Running]) {
			continue // measured, and not over a pool's worth measured better than the running width
		}
		if c.TokPerS < (1-r.band(in))*rate[in.Running] {
			continue
		}
		if pick == 0 || c.TokPerS > rate[pick] {
			pick = w
		}
	}
	return pick
}

// gainBound bounds rate(b) − rate(i) per sequence, in tokens per ms. When
// both widths take their tokens per cycle from Acc (neither is in own), the
// shared-S bound of gainLowerBound. Otherwise each width's tokens per cycle
// is bounded on its own, and the bound is b's lower end over c_b minus i's
// upper end over c_i: for a width in own, and for the running width (Acc's
// positions below it all come from the same cycles), z standard errors of
// its mean accepted length (Counts.TokensBounds); for a width read from the
// model, 1 + Σ S(k) with each S(k) at the end of its Wilson interval, which
// is looser than one interval for the sum (the positions of one cycle are
// positively correlated) and so still sound. The two widths' intervals
// come from different cycles, so they are combined end to end.
func gainBound(in Inputs, z float64, own map[int]Counts, b, i int, cb, ci float64) float64 {
	_, ownB := own[b]
	_, ownI := own[i]
	if !ownB && !ownI {
		return gainLowerBound(in.Acc, z, b, i, cb, ci)
	}
	loB, _ := tokensBounds(in, z, own, b)
	_, hiI := tokensBounds(in, z, own, i)
	return loB/cb - hiI/ci
}

// tokensBounds bounds width w's tokens per cycle as gainBound reads it.
func tokensBounds(in Inputs, z float64, own map[int]Counts, w int) (lo, hi float64) {
	if o, ok := own[w]; ok {
		return o.TokensBounds(z)
	}
	if w == in.Running && w >= 2 && w-1 <= len(in.Acc) {
		c := Counts{Cycles: in.Acc[0].Cycles}
		for _, o := range in.Acc[:w-1] {
			if o.Cycles != c.Cycles {
				c.Cycles = -1
				break
			}
			c.AtLeast = append(c.AtLeast, o.Count)
		}
		if c.Cycles > 0 {
			return c.TokensBounds(z)
		}
	}
	lo, hi = 1, 1
	for k := 1; k < w && k <= len(in.Acc); k++ {
		l, h := in.Acc[k-1].Bounds(z)
		lo, hi = lo+l, hi+h
	}
	return lo, hi
}

// gainLowerBound bounds rate(b) − rate(r) per sequence, in tokens per ms:
// Σ over positions of S(k)·a_k plus 1/c_b − 1/c_r, where a_k = [k<b]/c_b −
// [k<r]/c_r, taking S(k) at its lower bound where a_k > 0 and at its upper
// bound where a_k < 0. Both rates share S, so this is tighter, and still
// sound, than comparing the two widths' separate intervals.
func gainLowerBound(acc Acceptance, z float64, b, r int, cb, cr float64) float64 {
	g := 1/cb - 1/cr
	for k := 1; k < max(b, r); k++ {
		var a float64
		if k < b {
			a += 1 / cb
		}
		if k < r {
			a -= 1 / cr
		}
		lo, hi := acc[k-1].Bounds(z)
		if a > 0 {
			g += a * lo
		} else {
			g += a * hi
		}
	}
	return g
}

// explore returns a width past the observed positions whose predicted rate,
// with S held at its last observed value (an upper bound, since S never
// rises with k), beats bestRate by the margin; 0 when none.
func explore(acc Acceptance, in Inputs, r Rule, n int, bestRate float64) int {
	known := len(acc)
	if known == 0 || known+1 >= r.MaxWidth {
		return 0
	}
	last := acc[known-1].S()
	if last <= 0 {
		return 0
	}
	t, _ := acc.TokensPerCycle(known + 1)
	pick, pickRate := 0, bestRate*(1+r.Margin)
	for w := known + 2; w <= r.MaxWidth; w++ {
		t += last
		c, ok := CycleCost(in.Curve, in.Measured, w, n)
		if !ok {
			break
		}
		if rt := 1000 * float64(n) * t / c.MS; rt > pickRate {
			pick, pickRate = w, rt
		}
	}
	return pick
}

// String is the decision's one log line.
func (d Decision) String() string {
	var b strings.Builder
	if d.Switch {
		fmt.Fprintf(&b, "adapt: switch at width %d → %d: %s", d.Running, d.Choice, d.Reason)
	} else {
		fmt.Fprintf(&b, "adapt: stay at width %d: %s", d.Running, d.Reason)
	}
	fmt.Fprintf(&b, "; concurrency %d; margin %.0f%%", d.N, 100*d.Margin)
	if (!d.Switch || d.Trial > 0) && d.Best != d.Running { // a switch's reason already gives them
		fmt.Fprintf(&b, "; best %d gain %+.1f%% (lower bound %+.1f%%)", d.Best, 100*d.Gain, 100*d.GainLo)
	}
	if d.Explore > 0 {
		fmt.Fprintf(&b, "; wider could pay: explore %d", d.Explore)
		if d.ExploreIn > 0 {
			fmt.Fprintf(&b, " in %s (one wider look a re-check period)", d.ExploreIn.Round(time.Second))
		}
	}
	if d.Recheck > 0 {
		fmt.Fprintf(&b, "; wider could pay if the live tail holds: recheck %d", d.Recheck)
	}
	b.WriteString("; S(k)=")
	for i, p := range d.S {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%.3f(%.0f/%.0f)", p.K, p.S, p.Count, p.Cycles)
	}
	b.WriteString("; ms/cycle=")
	for i, c := range d.Candidates {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%.2f", c.Width, c.Cost.MS)
	}
	b.WriteString("; tok/s=")
	for i, c := range d.Candidates {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%.1f", c.Width, c.TokPerS)
		if c.TokensFrom == "own" && c.Width != d.Running {
			b.WriteString("(own)") // measured earlier, not read from the model
		}
	}
	return b.String()
}
