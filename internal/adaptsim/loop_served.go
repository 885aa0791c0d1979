package adaptsim

import "github.com/speclaunch/speclaunch/internal/adapt"

// withServed gives the loop the proxy's served seconds and ended
// requests of the serving engine (adapt.Target.Served). Apart from
// loop.go so that a copy of this package can drive a loop from before
// Target.Served (the 2026-12-03e replay, replay12e.sh) without it.
func withServed(t *adapt.Target, last func() Scrape) {
	t.Served = func(int) adapt.Served {
		c := last().Counters
		return adapt.Served{Secs: c.Served, Ended: c.Ended}
	}
}

// replayLoopName names the loop this copy drives, in the replay's table.
const replayLoopName = "today's loop"
