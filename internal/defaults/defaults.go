// Package defaults holds the built-in values of the settings whose owner
// is not config: the adaptive loop's tuning and bench's method. The owners
// declare their own names from these (adapt.DefaultMaxWidth, bench.
// DefaultRounds) and apply them to zero values; config's table of settings
// refers to the same values for `profile show`, --help and
// docs/environment-variables.md. It imports nothing, so config reads a
// default without depending on the loop or the harness.
package defaults

import "time"

// The adaptive loop's tuning (adapt.Config, docs/adaptive.md).
const (
	AdaptMaxWidth  = 17
	AdaptMinCycles = 256
	AdaptMargin    = 0.03
	AdaptWindow    = time.Minute
	AdaptMaxTrials = 2
)

// Bench's method (docs/bench.md, "What a run measures"): defaults, and the
// floors and caps a run must stay within.
const (
	BenchRounds         = 5
	BenchMinRounds      = 3
	BenchWarmup         = 3
	BenchMaxTokens      = 200
	BenchBasePort       = 18790 // arm i on 18790+i only where no free port is drawn from the range below
	BenchRequestTimeout = 120 * time.Second
	BenchMaxConcurrency = 256
	BenchSchedule       = "restart"
)

// Where bench draws an arm's loopback port at random when no base port is
// given: below Linux's ephemeral range (32768 up), which outgoing
// connections take from (internal/cli's armPortPick).
const BenchArmPortLo, BenchArmPortHi = 20000, 32000 // [lo, hi)

// BenchWidths returns the widths bench sweeps when none are given.
func BenchWidths() []int { return []int{2, 3, 4, 6, 8, 16} }
