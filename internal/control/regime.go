package control

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Regime is what was measured under one traffic, kept when the drift test
// found the traffic changed: each bucket's runs and the acceptance by
// position. When the traffic comes back (recall), it is taken back instead
// of learnt again.
type Regime struct {
	At          time.Time
	Runs        []map[int][]Run // per bucket, as Bucket.Runs
	Acc, Cycles []float64
}

// maxRegimes bounds Pair.Regimes (memory, and a saved file): two traffics
// that alternate (the calibrated matrix's) need one kept while the other
// is learnt; the bound is not a tuned figure.
const maxRegimes = 4

// remember keeps what was measured under the traffic that just ended, when
// any run of it counts (MinCycles); the acceptance without the scrapes the
// change was found in.
func (c Controller) remember(s *State, now time.Time) {
	if !c.on("regimes") {
		return
	}
	acc := s.Engine.before(s.Pair.Acc, s.Pair.Cycles) // the scrapes the change was found in span it
	r := Regime{At: now, Acc: acc.Acc, Cycles: acc.Cycles}
	counts := false
	for _, bk := range s.Pair.Buckets {
		runs := maps.Clone(bk.Runs)
		for w, rs := range runs {
			runs[w] = slices.Clone(rs)
			for _, x := range rs {
				counts = counts || x.Cycles >= c.cfg.MinCycles && x.Scrapes >= minScrapes
			}
		}
		r.Runs = append(r.Runs, runs)
	}
	if !counts {
		return
	}
	s.Pair.Regimes = append(s.Pair.Regimes, r)
	if len(s.Pair.Regimes) > maxRegimes {
		s.Pair.Regimes = s.Pair.Regimes[len(s.Pair.Regimes)-maxRegimes:]
	}
}

// recall takes back, at the first decision after a change of traffic
// (Pair.Relearning), the newest regime kept within RetryAfter whose
// acceptance predicts the tokens per cycle the serving width delivers
// since (its latest scrapes) within DriftZ standard errors: the drift
// test's bound, now saying the traffic is one seen before. Its runs
// join those measured since the change (the newest kept), its acceptance
// joins the one learnt since. It returns the log line, "" when none.
func (c Controller) recall(s *State, now time.Time) string {
	w := s.Engine.Width
	if !s.Pair.Relearning || w < 2 || !c.on("regimes") {
		return ""
	}
	if _, _, ok := s.Engine.recent(s.Pair.varL(w), Pair{}); !ok {
		return ""
	}
	// One try, at the first decision after the change: its scrapes all
	// follow the change (a window that straddled a second one would have
	// a wide spread, and match anything).
	s.Pair.Relearning = false
	for i := len(s.Pair.Regimes) - 1; i >= 0; i-- {
		r := s.Pair.Regimes[i]
		if now.Sub(r.At) >= c.cfg.RetryAfter || len(r.Runs) != len(s.Pair.Buckets) {
			continue
		}
		ref := Pair{Acc: r.Acc, Cycles: r.Cycles}
		t, v, _ := s.Engine.recent(s.Pair.varL(w), ref)
		want, ok := c.tokensPerCycle(ref, w, false)
		if !ok || c.unlike(t, want, v) {
			continue
		}
		for j := range s.Pair.Buckets {
			bk := &s.Pair.Buckets[j]
			for x, old := range r.Runs[j] {
				rs := append(slices.Clone(old), bk.Runs[x]...) // addRun writes runs in place: a copy
				if len(rs) > maxRuns {
					rs = rs[len(rs)-maxRuns:]
				}
				bk.Runs[x] = rs
			}
		}
		for k := range r.Acc {
			for len(s.Pair.Acc) <= k {
				s.Pair.Acc, s.Pair.Cycles = append(s.Pair.Acc, 0), append(s.Pair.Cycles, 0)
			}
			s.Pair.Acc[k] += r.Acc[k]
			s.Pair.Cycles[k] += r.Cycles[k]
		}
		s.Pair.Regimes = slices.Delete(slices.Clone(s.Pair.Regimes), i, i+1)
		return fmt.Sprintf("adapt: width %d delivers %.2f tokens a cycle, as under traffic seen before (%.2f): what was measured then is taken back", w, t, want)
	}
	return ""
}

// maxChanges bounds Pair.Changes: the last gap is what is read.
const maxChanges = 3

// check asks, at bucket b where width 1 serves by choice over the default
// def, for another width to be measured again (a check, served as a trial
// is) once def's newest run there is older than the last gap between two
// changes of traffic (the first scrape counts as one), the last seen
// within RetryAfter: width 1 drafts nothing, so no change of traffic shows
// while it serves, and this traffic has been seen to change that often.
// The width checked is def (its drift test reads the positions width 1's
// choice was made beside); none when every traffic seen before served
// width 1 here (elsewhere). It returns the width and why, 0 when no check
// is due.
func (c Controller) check(s *State, b, def int, now time.Time) (int, string) {
	ch := s.Pair.Changes
	if len(ch) > 0 && !s.Load.Since.IsZero() && s.Load.Since.Before(ch[0]) {
		ch = append([]time.Time{s.Load.Since}, ch...)
	}
	if s.Engine.Width != 1 || def == 1 || len(ch) < 2 || now.Sub(ch[len(ch)-1]) >= c.cfg.RetryAfter || !c.on("check") {
		return 0, ""
	}
	gap := ch[len(ch)-1].Sub(ch[len(ch)-2])
	var last time.Time
	for _, r := range s.Pair.Buckets[b].Runs[def] {
		if r.At.After(last) {
			last = r.At
		}
	}
	if now.Sub(last) < gap || c.elsewhere(s, b, def, now) <= 1 {
		return 0, ""
	}
	return def, fmt.Sprintf("check: width 1 shows no change of traffic, which was seen to change after %s; default width %d is measured again", gap.Round(time.Second), def)
}

// elsewhere is the width a traffic seen before (a regime kept within
// RetryAfter, the newest first) served bucket b fastest at, if not 1; def
// when no regime measured b; 1 when every one that did served width 1.
func (c Controller) elsewhere(s *State, b, def int, now time.Time) int {
	known := false
	for i := len(s.Pair.Regimes) - 1; i >= 0; i-- {
		r := s.Pair.Regimes[i]
		if now.Sub(r.At) >= c.cfg.RetryAfter || b >= len(r.Runs) {
			continue
		}
		best, bestRate := 0, 0.0
		for w, rs := range r.Runs[b] {
			var tok, secs float64
			for _, x := range rs {
				if x.Cycles >= c.cfg.MinCycles && x.Scrapes >= minScrapes {
					tok, secs = tok+x.Tokens, secs+x.Secs
				}
			}
			if secs > 0 && tok/secs > bestRate {
				best, bestRate = w, tok/secs
			}
		}
		if best > 1 {
			return best
		}
		known = known || best == 1
	}
	if known {
		return 1
	}
	return def
}
