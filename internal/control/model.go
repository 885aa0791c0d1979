package control

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/schedule"
)

// tokensPerCycle is 1 + S(1) + … + S(w−1) from the pair's acceptance.
// When extrapolating, a position not observed continues the last observed
// ratio S(m)/S(m−1), with S(0) = 1: the model of independent acceptance,
// S(k) = α^k, fitted at the tail. The ratio is at most 1 because S never
// rises; above 1 it is noise between positions read over different cycle
// counts. Holding the last S instead (an upper bound) over-predicted width
// 16's tokens per cycle from width 4 by 104 % and 114 % on two H100 pairs,
// the ratio by 18 % and 22 % (docs/benchmark_results/h100-follow-2026-12-05b.md).
// Otherwise a position not observed makes the width unpredictable.
func (c Controller) tokensPerCycle(p Pair, w int, extrapolate bool) (float64, bool) {
	t, last, prev, seen := 1.0, 1.0, 1.0, false // last starts at S(0)
	for k := 1; k < w; k++ {
		v, ok := p.S(k, c.cfg.MinCycles)
		switch {
		case ok:
		case !extrapolate || !seen || !c.on("extrapolation"):
			return 0, false
		case prev > 0:
			v = last * math.Min(1, last/prev)
		default:
			v = 0
		}
		t += v
		last, prev, seen = v, last, true
	}
	return t, true
}

// maxReadGap is the most rows apart two probed counts may be for a count
// between them to be read linearly: the widest spacing of the probe
// before traffic (rows 4w, 36 to 68). Farther apart, the line could hide
// a kernel's step (the H200's probe showed one between 8 and 9 rows,
// docs/design/adaptive.md, "The probe"), so such rows are probed.
const maxReadGap = 4

// verifyAt is the probed verify ms of rows (fractional rows between two
// probed counts at most maxReadGap apart read linearly); ok false
// outside the probed range or across a wider gap.
func verifyAt(v map[int]float64, rows float64) (float64, bool) {
	keys := slices.Sorted(maps.Keys(v))
	i, _ := slices.BinarySearch(keys, int(math.Ceil(rows)))
	if i == len(keys) || i == 0 && float64(keys[0]) != rows {
		return 0, false
	}
	hi := keys[i]
	if float64(hi) == rows || i == 0 {
		return v[hi], true
	}
	lo := keys[i-1]
	if hi-lo > maxReadGap {
		return 0, false
	}
	f := (rows - float64(lo)) / float64(hi-lo)
	return v[lo] + f*(v[hi]-v[lo]), true
}

// draftFit is drafting ms per cycle = a + b·(w−1), fitted to the widths
// measured at bucket b (measured ms per cycle − probed verify ms); from
// one width the split is unknown and taken half and half. ok false when
// no drafting width was measured.
func (c Controller) draftFit(s *State, b int) (a, slope float64, ok bool) {
	n := decoding(s, b)
	var xs, ds []float64
	priced := c.waitPerToken(s, b) > 0 // the wait is priced apart: the fit reads the engine's own time
	for _, w := range c.measured(s, b) {
		v, okV := verifyAt(s.Pair.Verify, n*float64(w))
		if w < 2 || !okV {
			continue
		}
		var secs, cycles float64
		for _, r := range s.Pair.Buckets[b].Runs[w] {
			switch {
			case !priced:
				secs, cycles = secs+r.Secs, cycles+r.Cycles
			case r.Busy > 0:
				secs, cycles = secs+r.Busy, cycles+r.Cycles
			} // a run without it (an older state's) would count its wait twice
		}
		if cycles <= 0 {
			continue
		}
		xs, ds = append(xs, float64(w-1)), append(ds, math.Max(0, 1000*secs/cycles-v))
	}
	switch len(xs) {
	case 0:
		return 0, 0, false
	case 1:
		return ds[0] / 2, ds[0] / (2 * xs[0]), true
	}
	var mx, md, sxx, sxd float64
	for i := range xs {
		mx, md = mx+xs[i], md+ds[i]
	}
	mx, md = mx/float64(len(xs)), md/float64(len(xs))
	for i := range xs {
		sxx, sxd = sxx+sq(xs[i]-mx), sxd+(xs[i]-mx)*(ds[i]-md)
	}
	slope = math.Max(0, sxd/sxx)
	return math.Max(0, md-slope*mx), slope, true
}

// predict is the model's tok/s per request in flight for width w at
// bucket b: tokens per cycle (extrapolated) over ms per cycle (verify of
// N·w rows plus drafting, N the sequences decoding together).
func (c Controller) predict(s *State, b, w int) (float64, bool) {
	n := decoding(s, b)
	v, ok := verifyAt(s.Pair.Verify, n*float64(w))
	if !ok || v <= 0 {
		return 0, false
	}
	if w < 2 {
		if n > 1 && c.on("classic load") { // several in flight: out of step, unlike the probe's rows
			if c.cfg.ClassicLive > 1 {
				v *= c.cfg.ClassicLive
			}
			if c.cfg.ClassicLoad > 1 {
				v *= 1 + (c.cfg.ClassicLoad-1)*math.Min(1, (n-1)/3)
			}
		}
		return 1000 / v, true
	}
	t, ok := c.tokensPerCycle(s.Pair, w, true)
	if !ok {
		return 0, false
	}
	a, slope, ok := c.draftFit(s, b)
	if !ok {
		return 0, false
	}
	return 1000 / ((v + a + slope*float64(w-1)) * (1/t + c.waitPerToken(s, b))), true
}

// decoding is the sequences that decode together at bucket b: its mean
// load, at most the engine's slots. Requests beyond the slots wait in the
// engine's queue, and the shell counts only the share of their time they
// held a slot (proxy.Backend.Served), so a width's rate there is its rate
// at the slots' load. On a one-slot engine (the sim's default, as
// mlxcel-server's max_batch_size=1: internal/sim) every load decodes one
// sequence; priced as four batched, the probe under load asked for rows
// of four sequences that engine never runs, ran its 30 s bound with none
// measured, and classic, priced without the queue its requests waited
// in, was tried again and again (docs/benchmark_results/
// sim-one-slot-2026-12-07.md).
func decoding(s *State, b int) float64 {
	n := math.Max(1, s.Pair.Buckets[b].N)
	if k := s.Engine.Slots; k > 0 {
		n = math.Min(n, float64(k))
	}
	return n
}

// waitPerToken is what a request waits outside the engine's own time at
// bucket b, in engine cycles per token generated, from the speculative
// widths measured there: each run's served − busy seconds in its own
// cycles (busy seconds per cycle), over the tokens (pooling seconds and
// cycles across widths first weighted a wide width's long cycles by its
// many tokens: +37 % with widths 2 and 17, a review's computation). With
// several requests in flight a request waits for turns of the server
// loop, whose rounds are the width's cycles, so a wide width's few cycles
// a request carry the same turns at a longer cycle: on the sim's H200
// cost (simcost's PickupSpec, 5.8 rounds a request at four sequences)
// width 10 runs 9 % ahead of 17 at four clients, where cycles alone put
// 17 ahead by 12 %; on the H200 at four clients, clients got 0.96-0.98 of
// the rate llama-server's own timings promise at classic and 0.85-0.93 at
// widths 2-8 (docs/design/adaptive.md, the rate's definition). 0 at one
// request in flight (what waits there, the prompt, costs no rounds) and
// where the engine gives no time of its own.
func (c Controller) waitPerToken(s *State, b int) float64 {
	if !c.on("wait") || c.cfg.Buckets[b][0] <= 1 || s.Engine.Slots == 1 {
		return 0 // one sequence decodes at a time: no turns to wait for
	}
	var wait, tok float64
	for w, rs := range s.Pair.Buckets[b].Runs {
		for _, r := range rs {
			if w >= 2 && r.Busy > 0 { // a run that waited nothing counts its tokens too
				wait, tok = wait+max(0, r.Secs-r.Busy)*r.Cycles/r.Busy, tok+r.Tokens
			}
		}
	}
	if tok <= 0 || wait <= 0 {
		return 0
	}
	return wait / tok
}

// pickTrial names a width to try at bucket b against base, the width
// chosen: of the widths never measured there (nor tried within
// RetryAfter) whose predicted rate would pass the rule, the one predicted
// fastest, with its predicted rate; or a width one engine measured ahead
// of base, inside the noise, measured again on a second engine (retrial).
// A trial that does not pass is undone by the next decision. With no
// pick, why says what held every trial back (noTrial) for the stay line,
// so that a controller that stays says why it tries nothing.
func (c Controller) pickTrial(s *State, b, base int, now time.Time) (int, float64, string) {
	if !c.on("trials") {
		return 0, 0, ""
	}
	eb, ok := c.estimate(s, b, base)
	if !ok {
		return 0, 0, ""
	}
	sigma := c.spread(b)
	if !c.on("spread") {
		sigma = 0
	}
	// A trial is one fresh engine: its gain must clear one engine's
	// spread on top of base's uncertainty, and the switch time. It must
	// also repay its two switches (there, and back if it fails) at its
	// predicted rate.
	accept := c.cfg.Z*math.Sqrt(sigma*sigma+eb.RelVar) + c.need(s)
	var held noTrial
	pick, pickRate, again := 0, 0.0, false
	bk := s.Pair.Buckets[b]
	for w := 1; w <= c.cfg.MaxWidth; w++ {
		if ew, measured := c.estimate(s, b, w); measured || w == base {
			if p, ok := c.retrial(s, b, w, ew, eb, accept, sigma, now); ok && w != base && p > pickRate {
				pick, pickRate, again = w, p, true
			}
			continue
		}
		if t, ok := bk.Tried[w]; ok && now.Sub(t) < c.cfg.RetryAfter {
			held.tried++
			continue
		}
		p, ok := c.predict(s, b, w)
		switch {
		case !ok:
			held.unpriced++
		case p/eb.Rate-1 >= accept && p/eb.Rate-1 > 2*c.need(s) && p > pickRate:
			pick, pickRate, again = w, p, false
		case p > held.rate:
			held.width, held.rate = w, p
		}
	}
	switch {
	case pick == 0:
		return 0, 0, held.String(base, eb.Rate, math.Max(accept, 2*c.need(s)))
	case again:
		ew, _ := c.estimate(s, b, pick)
		return pick, pickRate, fmt.Sprintf("width %d measured %+.1f%% over width %d on one engine, inside the noise, and predicted %+.1f%%: a second engine measures it", pick, 100*(ew.Rate/eb.Rate-1), base, 100*(pickRate/eb.Rate-1))
	}
	why := fmt.Sprintf("width %d predicted %+.1f%% over width %d, above the %.1f%% a trial needs to pass the noise and repay the switch", pick, 100*(pickRate/eb.Rate-1), base, 100*accept)
	return pick, pickRate, why
}

// retrial is the predicted rate of width w, measured at bucket b on one
// engine only, when a second engine is worth measuring: one engine cannot
// pass the rule (its bound carries the spread between engines twice), so
// a width the model predicts to pass (accept) and whose one engine ran
// ahead of base by more than one engine's spread plus its two switches is
// tried again; ahead by less, the first engine is as likely the engine as
// the width. It is the one trial within RetryAfter of the last: asked for
// only while no trial of w began since its run (a retrial that ended
// unjudged waits RetryAfter, as any trial does).
func (c Controller) retrial(s *State, b, w int, ew, eb Estimate, accept, sigma float64, now time.Time) (float64, bool) {
	if !c.on("retrial") || ew.Runs != 1 || w == s.Engine.Width || ew.Rate/eb.Rate-1 <= 2*c.need(s)+sigma {
		return 0, false
	}
	if !retryDue(s.Pair.Buckets[b].Tried[w], c.lastRun(s, b, w), now, c.cfg.RetryAfter) {
		return 0, false
	}
	p, ok := c.predict(s, b, w)
	return p, ok && p/eb.Rate-1 >= accept
}

// retryDue says whether a width whose last trial began at tried (zero:
// none) and whose newest run ended at ran may be tried again at now: no
// trial of it began since that run, or RetryAfter has passed.
func retryDue(tried, ran, now time.Time, after time.Duration) bool {
	return tried.Before(ran) || now.Sub(tried) >= after
}

// lastRun is when the newest run of width w at bucket b ended.
func (c Controller) lastRun(s *State, b, w int) time.Time {
	var last time.Time
	for _, r := range s.Pair.Buckets[b].Runs[w] {
		if r.At.After(last) {
			last = r.At
		}
	}
	return last
}

// noTrial is what held every width back from a trial: the best
// prediction that fell short, and the widths tried lately or not
// predicted (unpricedWhy).
type noTrial struct {
	width           int
	rate            float64
	tried, unpriced int
}

// String says it in one clause; need is the gain a trial must show.
func (n noTrial) String(base int, baseRate, need float64) string {
	var parts []string
	switch {
	case n.width > 0:
		// One clause whichever side of the base the best prediction falls:
		// a prediction near +0 % flipped between two wordings, and each
		// flip logged the stay line again (stayShape).
		parts = append(parts, fmt.Sprintf("no trial: the fastest predicted, width %d, is %+.1f%% against width %d, short of the %.1f%% a trial needs", n.width, 100*(n.rate/baseRate-1), base, 100*need))
	case n.unpriced > 0:
		// Nothing priced (the probe failed, or nothing measured here
		// fits a drafting cost): no prediction was made to fall short (a
		// pass read "no width is predicted faster" where none was).
		parts = append(parts, fmt.Sprintf("no trial: no untried width can be priced yet (%s: %s)", counted(n.unpriced, "width"), unpricedWhy))
		n.unpriced = 0
	default:
		parts = append(parts, fmt.Sprintf("no trial: no width is predicted faster than width %d", base))
	}
	if n.unpriced > 0 {
		parts = append(parts, fmt.Sprintf("%s not priced (%s)", counted(n.unpriced, "other width"), unpricedWhy))
	}
	if n.tried > 0 {
		parts = append(parts, fmt.Sprintf("%d tried lately", n.tried))
	}
	return strings.Join(parts, "; ")
}

// unpricedWhy is why widths are not priced.
const unpricedWhy = "the probe lacks their verify rows, or nothing measured at this load gives their drafting cost"

// probeRows are the rows the model reads at bucket b that it cannot price
// yet: N·w for every width, rounded down and up, where no two probed row
// counts at most maxReadGap apart lie on both sides (verifyAt). The
// probe before traffic measures every width's rows at one, two and four
// in flight, so up to four a bucket's rows lie between probed ones and no
// probe runs under load. Asked for each exact row, the probe under load
// measured rows batched with live traffic beside the idle ones, priced
// them cheap, and the model predicted widths 12-15 at four clients
// +50-66 % over width 4: width 13 measured -10.4 % (on an H100,
// docs/benchmark_results/h100-follow-2026-12-06h.md; on 2026-12-06g such
// a probe ran its 30 s bound and cost that phase 4.8 %).
func (c Controller) probeRows(s *State, b int) []int {
	n := decoding(s, b)
	seen := map[int]bool{}
	var rows []int
	for w := 1; w <= c.cfg.MaxWidth; w++ {
		for _, r := range []int{int(math.Floor(n * float64(w))), int(math.Ceil(n * float64(w)))} {
			if _, priced := verifyAt(s.Pair.Verify, float64(r)); !priced && !seen[r] {
				seen[r] = true
				rows = append(rows, r)
			}
		}
	}
	slices.Sort(rows)
	return rows
}

// probeFor asks for the probe of bucket b's rows when any is missing and
// none was asked for within RetryAfter. The controller goes on meanwhile:
// only trials wait for it. While another probe runs none is asked for: b
// is noted, said once, and probed when that one ends if the load is still
// there (probed); a probe not run is not a probe tried, so b keeps no
// RetryAfter for it.
func (c Controller) probeFor(s *State, b int, now time.Time) []Action {
	rows := c.probeRows(s, b)
	bk := &s.Pair.Buckets[b]
	if len(rows) == 0 || !bk.Tried[0].IsZero() && now.Sub(bk.Tried[0]) < c.cfg.RetryAfter {
		return nil
	}
	what := fmt.Sprintf("the verify cost of %d-%d rows, for %s", rows[0], rows[len(rows)-1], schedule.InFlight(s.Pair.Schedule[b].Range()))
	if k, n := s.Engine.Slots, s.Load.mean(); k > 0 && n > float64(k-1) {
		// No slot free on average: each of the probe's requests waits in
		// the queue for a client's to end. On the sim under four clients
		// it ran its 30 s bound with 0 or 1 row measured on one, two and
		// four slots (docs/benchmark_results/sim-one-slot-2026-12-07.md);
		// on an H100 at four clients on four slots it went bare and
		// priced wide widths cheap (probeRows). The probe before traffic
		// measured the slots' load (BeforeLoadsFor). Not a probe tried.
		return []Action{{Op: Log, Msg: fmt.Sprintf("adapt: not probing %s now: %.1f requests in flight on an engine of %s leave no slot free, so the probe would wait in its queue behind the clients'; it runs at a load that leaves one free, if one comes", what, n, counted(k, "slot"))}}
	}
	if p := &s.Probe; !p.Since.IsZero() {
		if p.Bucket == b || slices.Contains(p.Skipped, b) {
			return nil
		}
		p.Skipped = append(p.Skipped, b)
		running := "another probe"
		if p.Bucket >= 0 && p.Bucket < len(s.Pair.Schedule) {
			running = "the probe for " + schedule.InFlight(s.Pair.Schedule[p.Bucket].Range())
		}
		return []Action{{Op: Log, Msg: fmt.Sprintf("adapt: not probing %s now: %s is under way (one at a time); asked for when it ends if the load is still there", what, running)}}
	}
	bk.Tried[0] = now // width 0: the probe
	s.Probe = Probing{Since: now, Bucket: b}
	return []Action{{Op: Probe, Rows: rows, Reason: what}}
}

// counted says n things with the count's own number: "1 run", "3 runs".
func counted(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// probed takes a probe's result. A probe the controller asked for ends
// there, and the bucket the load is in now is probed if it lacks rows (the
// load entered it while that one ran).
func (c Controller) probed(s *State, o Observation) []Action {
	var acts []Action
	switch {
	case o.Err != "" && o.Cut && !o.Before:
		// Not the engine's fault: a switch of the loop's own (the follower
		// serving the load's width) cut it, and with the rows barred for
		// RetryAfter no untried width could be priced for half an hour (a
		// user pass on the sim at four clients).
		acts = append(acts, Action{Op: Log, Msg: fmt.Sprintf("adapt: the probe stopped, %s, with %s measured; the rows it lacks are probed again on the engine that serves now", o.Err, counted(len(o.Verify), "row count"))})
		if b := s.Probe.Bucket; b >= 0 && b < len(s.Pair.Buckets) {
			delete(s.Pair.Buckets[b].Tried, 0)
		}
	case o.Err != "":
		acts = append(acts, Action{Op: Log, Msg: fmt.Sprintf("adapt: the probe stopped, %s, with %s measured; the controller goes on, and a width whose rows it lacks is not tried until the probe is asked for again", o.Err, counted(len(o.Verify), "row count"))})
	}
	if s.Pair.Verify == nil {
		s.Pair.Verify = map[int]float64{}
	}
	for r, v := range o.Verify {
		if r >= 1 && v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			s.Pair.Verify[r] = v
		}
	}
	s.Pair.Saved = o.Now
	acts = append(acts, Action{Op: Save})
	if !o.Before && !s.Probe.Since.IsZero() {
		s.Probe = Probing{}
		if b := s.Load.Bucket; b >= 0 {
			acts = append(acts, c.probeFor(s, b, o.Now)...)
		}
	}
	return acts
}
