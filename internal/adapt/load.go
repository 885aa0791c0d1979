package adapt

import "math"

// The live load: how many sequences the engine decodes together, from
// the requests-processing samples the loop's scrapes take, and when a
// change of it voids what the loop measured.

// liveScrapes is how many of the latest scrapes the concurrency is taken
// over: 32 s at the default interval, so a change of load shows within
// about a minute however long the engine has served (a mean over its life
// took as long again as the load had lasted). The samples run on across
// engines: the load is the clients'. An engine's scrapes while the one
// before it still drains (Target.Shared), which show fewer requests, are
// not sampled.
const liveScrapes = 16

// liveLoad turns samples of the requests processing (one a scrape that
// generated tokens) into the concurrency the loop works at. Four
// independent clients keep a mean near 3.5 (each waits for its answer,
// then sends again; with requests of one length they finish close
// together, so one scrape can read 1): rounded, it flipped between 3 and
// 4 from one epoch to the next (the H200 summary of 2026-12-03c: six flips
// in 75 s), and each flip restarted the cost measured and dropped the
// trials taken and the widths undone, so the loop tried 6, 8, 7 and 6
// again and never settled. Half a sequence either way moves the verify
// rows priced by one row in eight; a change of load moves the mean by a
// sequence or more. So n moves two ways, neither on jitter:
//
//   - a jump: the mean of half a window or more leaves n by
//     concurrencyBand of n (at least concurrencyBandMin). The samples
//     restart and n stays; the first half window of fresh ones decides:
//     still outside the band, n is their mean rounded (4 to 8 clients lands
//     at 8, never at 5 or 7 on the way); back inside, nothing moved.
//   - a creep: a full window whose rounded mean is not n, at least
//     concurrencyCreep from it, for a window of scrapes in a row (5 to 4
//     clients, inside a jump's band at 5).
type liveLoad struct {
	win     []float64 // the latest samples, at most liveScrapes
	n       int       // 0 before half a window of samples
	pending bool      // a jump seen: fresh samples decide
	creep   int       // scrapes in a row of a creep
}

const (
	concurrencyBand    = 0.25
	concurrencyBandMin = 0.8
	concurrencyCreep   = 0.7
)

func (c *liveLoad) add(v float64) {
	c.win = append(c.win, v)
	if len(c.win) > liveScrapes {
		c.win = c.win[1:]
	}
	mean := c.mean()
	m := max(1, int(math.Round(mean)))
	half := len(c.win) >= liveScrapes/2
	outside := math.Abs(mean-float64(c.n)) >= max(concurrencyBandMin, concurrencyBand*float64(c.n))
	switch {
	case c.n < 1:
		if half {
			c.n = m
		}
	case c.pending:
		if half {
			c.pending = false
			if outside {
				c.n = m
			}
		}
	case half && outside:
		c.pending, c.creep, c.win = true, 0, c.win[:0]
	case len(c.win) == liveScrapes && m != c.n && math.Abs(mean-float64(c.n)) >= concurrencyCreep:
		if c.creep++; c.creep >= liveScrapes {
			c.n, c.creep = m, 0
		}
	default:
		c.creep = 0
	}
}

func (c *liveLoad) mean() float64 {
	if len(c.win) == 0 {
		return 0
	}
	var sum float64
	for _, v := range c.win {
		sum += v
	}
	return sum / float64(len(c.win))
}

// value is the concurrency: n, or before it is set the mean of the samples
// so far, rounded (1 with none).
func (c *liveLoad) value() int {
	if c.n >= 1 {
		return c.n
	}
	return max(1, int(math.Round(c.mean())))
}

// loadChanged says whether the trials taken and the widths undone over
// concurrencies from lo to hi are void: the range spans half again or
// more (1 to 2 sequences, 2 to 3, 4 to 6, also in steps). A width's rate against
// another's shifts with the rows verified together, but not between 3 and
// 4 of four independent clients, whose mean can rest near either for
// minutes: in the sim matrix's cells with pausing clients each such move
// dropped the trials and the loop tried the same widths again.
func loadChanged(lo, hi int) bool {
	if lo < 1 {
		return false
	}
	return 2*max(lo, hi) >= 3*min(lo, hi)
}
