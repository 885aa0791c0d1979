package proxy

import (
	"math"
	"time"
)

// The client work a backend served, for the adaptive loop's measure of a
// width (Backend.ServedSeconds). llama-server's own timings leave out the
// time a request waits in its queue for the next turn of the server loop
// and the time to hand its answer back; with a speculative width that
// turn is a whole draft-and-verify cycle of every slot. On an H200 under
// 4 clients (docs/benchmark_results/adapteval/
// h200-llamacpp-d32676d-q8_0-pair7243L36-code-c4-2026-12-03e-engine-vs-client.json)
// the clients got 0.97-0.98 of what llama-server's timings promise at
// classic decoding and 0.85-0.93 at widths 2-8: a loop that believed the
// engine chose width 4 at 0.91 of classic's rate.

// maxWorkLevel bounds the levels of concurrent work kept apart: a request
// that had more than this many in flight beside it counts as this many.
const maxWorkLevel = 256

// workMeter counts the client requests in flight on one backend and the
// seconds of those that ended, by the mean number in flight over each
// one's life (its level: itself included): secs[k] sums the seconds of
// the requests whose level is in [k, k+1), per[k] their seconds/level.
type workMeter struct {
	n     int       // requests in flight
	area  float64   // ∫ n dt in seconds, up to at
	at    time.Time // when area was last brought up to date
	secs  [maxWorkLevel + 1]float64
	per   [maxWorkLevel + 1]float64
	ended int // requests counted
}

// workMark is one request's start, for end.
type workMark struct {
	t    time.Time
	area float64
	ok   bool // begun: a zero mark is no request
}

func (m *workMeter) advance(now time.Time) {
	if !m.at.IsZero() {
		if d := now.Sub(m.at).Seconds(); d > 0 {
			m.area += float64(m.n) * d
		}
	}
	if now.After(m.at) {
		m.at = now
	}
}

func (m *workMeter) begin(now time.Time) workMark {
	m.advance(now)
	m.n++
	return workMark{t: now, area: m.area, ok: true}
}

// end ends a request begun with w; count false drops it (it never reached
// the engine: the proxy sent it to the next one).
func (m *workMeter) end(w workMark, now time.Time, count bool) {
	if !w.ok {
		return
	}
	m.advance(now)
	m.n = max(0, m.n-1)
	d := now.Sub(w.t).Seconds()
	if !count {
		return
	}
	m.ended++
	if d <= 0 {
		return
	}
	level := max(1, (m.area-w.area)/d)
	k := min(maxWorkLevel, int(math.Floor(level)))
	m.secs[k] += d
	m.per[k] += d / level
}

// served is the seconds of the requests that ended, each one's share of
// slots: a request whose level was above the slots waited in the engine's
// queue part of its life, and counts slots/level of it. The sum is exact
// by buckets: a level in [k, k+1) is at most slots when k < slots, and at
// least slots otherwise; the last bucket holds every level from
// maxWorkLevel up and is bounded both ways. slots ≤ 0: unknown, every
// second counts.
func (m *workMeter) served(slots int) float64 {
	s := 0.0
	for k := 1; k <= maxWorkLevel; k++ {
		switch {
		case slots <= 0 || k < slots && k < maxWorkLevel:
			s += m.secs[k]
		case k < maxWorkLevel:
			s += float64(slots) * m.per[k]
		default:
			s += math.Min(m.secs[k], float64(slots)*m.per[k])
		}
	}
	return s
}
