package adaptsim

import "time"

// Scrape is what a controller sees of the serving engine at one scrape.
type Scrape struct {
	Now time.Time // virtual
	// Engine changes whenever another engine process serves; Width is
	// its width (1: speculation off).
	Engine uint64
	Width  int
	// Shared: another engine runs beside this one on the GPU (a switch's
	// new engine starting, or the old one draining after it).
	Shared bool
	// InFlight is the proxy's requests in flight (the load); Processing
	// the engine's gauge of requests decoding (requests waiting for their
	// first turn are in flight, not processing); Slots its total_slots.
	InFlight, Processing float64
	Slots                int
	Counters             Counters
}

// Command is what a controller asks of the harness.
type Command struct {
	Switch int    // serve this width (≥ 1); 0 asks nothing
	Reason string // why, as logged
}

// Env is what the harness lends a controller for its run.
type Env struct {
	// Probe is one probe of the serving engine: the ms of one target
	// forward over rows new tokens, idle (no virtual time passes).
	Probe    func(rows int) float64
	Log      func(msg string)
	MaxWidth int
	Slots    int
}

// Controller is an adaptive width controller as the harness drives it,
// in virtual time and on one goroutine: Start once before traffic, then
// Scrape every Options.Interval, Switched when a switch it asked for has
// taken over (took: from the ask to then), and Close at the end.
type Controller interface {
	Start(env Env, s Scrape) []Command
	Scrape(s Scrape) []Command
	Switched(s Scrape, took time.Duration) []Command
	Close()
}

// Sampler is a Controller that also reads the load between scrapes, as
// serve's schedule follower does (internal/follow samples the proxy's
// in-flight count every 250 ms): Run calls Sample after each of its
// 250 ms steps with Now, Engine, Width and InFlight set, Counters empty.
type Sampler interface {
	Sample(s Scrape) []Command
}

// Factory makes a fresh controller for one run of profile p.
type Factory func(p Profile) Controller

// Fixed is a controller that never switches: the engine's default.
type Fixed struct{}

// Start, Scrape, Switched and Close do nothing.
func (Fixed) Start(Env, Scrape) []Command              { return nil }
func (Fixed) Scrape(Scrape) []Command                  { return nil }
func (Fixed) Switched(Scrape, time.Duration) []Command { return nil }
func (Fixed) Close()                                   {}
