package adaptsim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/speclaunch/speclaunch/internal/simcost"
)

// Profile is one engine and model pair of the matrix.
type Profile struct {
	Name  string
	Model simcost.Model
	// Llama says the engine is llama-server (the controller's
	// control.LlamaClassicLoad applies); else mlxcel's stand-in.
	Llama bool
	// Default is the engine's default width, the width a run starts at
	// and the safe answer a controller is judged against (llama.cpp 4,
	// mlxcel 16).
	Default int
	// SwitchS is the virtual seconds a switch takes, the old engine
	// serving meanwhile (an overlap switch); then the old one drains
	// beside the new for Model.Drain.
	SwitchS float64
	// Slots is the engine's total_slots (-np).
	Slots int
	// ReqTokens is the tokens a request.
	ReqTokens int
	// Clients is the client count its replay was calibrated at (0: any);
	// Traffics gives a replay its own load only, and the load change.
	Clients int
	// LoadAccept moves the acceptance with load: each conditional
	// acceptance times 1 + LoadAccept·(n−1)/3 with n sequences decoding
	// (n at most 4). On an H100 the draft acceptance at one width ran
	// 11-15 % higher at four clients than at one
	// (docs/benchmark_results/h100-follow-2026-12-05.md). 0: none, as in
	// the matrix's profiles; BenchmarkHardwareEffects turns it on.
	LoadAccept float64
}

// Phase is a stretch of traffic: Clients closed-loop clients (each sends
// its next request when the last one ends) of one Class (0, or 1: the
// harder mix, classB), or Mixed: each request draws one of the mixed
// classes (mixedScale) at random, a steady traffic whose requests differ (as followeval's rotation
// of code and prose prompts did on an H100, where one engine's requests
// at width 4 gave 2.89 ± 0.71 tokens a cycle:
// docs/benchmark_results/h100-follow-2026-12-05.md).
type Phase struct {
	Dur     time.Duration
	Clients int
	Class   int
	Mixed   bool
}

// Traffic is phases repeated until the horizon.
type Traffic struct {
	Name   string
	Phases []Phase
}

// Options are a run's settings; zero fields take the defaults.
type Options struct {
	Horizon  time.Duration // virtual length of a run (30 min)
	Interval time.Duration // between scrapes (2 s, the loops' default)
	MaxWidth int           // widths the oracle sweeps, 1..MaxWidth (17)
	// Log, when set, gets the harness's and the controller's log lines.
	Log func(string)
	// SeedOffset moves every cell's seeds (Matrix): a second seed set,
	// for the run-to-run noise.
	SeedOffset uint64
}

// Defaults of Options.
const (
	DefaultHorizon  = 30 * time.Minute
	DefaultInterval = 2 * time.Second
	DefaultMaxWidth = 17
	// subStep is the engine's pricing step: short enough to resolve the
	// 2 s drain (simcost.H200Drain) in eight parts.
	subStep = 250.0
)

func (o Options) withDefaults() Options {
	if o.Horizon <= 0 {
		o.Horizon = DefaultHorizon
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.MaxWidth <= 0 {
		o.MaxWidth = DefaultMaxWidth
	}
	return o
}

// Outcome is one run of one cell.
type Outcome struct {
	// Tokens the clients got; Mean the same with each engine's own
	// random effect taken out (what the controller's choices give on the
	// mean engine, the drain's cost kept); Oracle what the best fixed
	// width of each phase gives on the mean engine (the expectation);
	// Default what the default width gives on the mean engine, and
	// DefaultFirst on the run's first engine.
	Tokens, Mean, Oracle, Default, DefaultFirst float64
	// Mean, Oracle and Default over the last third of the run.
	EndMean, EndOracle, EndDefault float64
	Switches                       []int   // the widths switched to, in order
	SettleS                        float64 // virtual seconds to the last switch asked (0: none)
	EndWidth                       int
}

// Frac is the run's tokens on the mean engine over the per-phase
// oracle's.
func (o Outcome) Frac() float64 { return o.Mean / o.Oracle }

// Start is the virtual clock's origin.
var Start = time.Unix(1_800_000_000, 0).UTC()

// sim is one run's state.
type sim struct {
	p        Profile
	o        Options
	rng      *rand.Rand
	acc      accepts
	cur      *engine
	pendW    int     // width a switch is under way to (0: none)
	pendAt   float64 // virtual ms it takes over
	askedAt  float64
	drainTo  float64 // virtual ms the old engine drains to
	now      float64 // virtual ms
	inFlight int
	clients  []client
	class    int
	out      Outcome
	log      func(string)
	// refs holds each phase's oracle and default rates: pure in the
	// phase, and half the matrix's time when priced at every step.
	refs map[Phase][2]float64
}

// Run runs controller c on profile p under traffic tr for the horizon,
// in virtual time, from seed; the same seed gives the same run.
func Run(p Profile, tr Traffic, c Controller, seed uint64, o Options) Outcome {
	o = o.withDefaults()
	s := &sim{p: p, o: o, rng: rand.New(rand.NewPCG(seed, 0xada)), log: o.Log}
	s.acc = newAccepts(p, o.MaxWidth)
	s.cur = &engine{gen: 1, width: p.Default, z: simcost.EngineDraw(s.rng.Uint64()), takeover: math.Inf(-1), warm: phaseAt(tr.Phases, 0).Clients}
	z0 := s.cur.z
	env := Env{MaxWidth: o.MaxWidth, Slots: p.Slots, Probe: s.probe, Log: func(m string) { s.logf("%6.0fs %s", s.now/1000, m) }}
	s.inFlight = phaseAt(tr.Phases, 0).Clients
	for range s.inFlight { // out of step: each part-way through a request
		s.clients = append(s.clients, client{eng: s.cur, left: float64(1 + s.rng.IntN(p.ReqTokens)), cls: s.classOf(phaseAt(tr.Phases, 0))})
	}
	s.class = phaseAt(tr.Phases, 0).Class
	s.handle(c.Start(env, s.scrape()))
	horizon := float64(o.Horizon / time.Millisecond)
	every := float64(o.Interval / time.Millisecond)
	sampler, _ := c.(Sampler)
	for s.now < horizon {
		for next := s.now + every; s.now < next-1e-9; {
			dt := math.Min(subStep, next-s.now)
			ph := phaseAt(tr.Phases, s.now)
			s.inFlight, s.class = ph.Clients, ph.Class
			s.account(ph, dt, z0, s.now >= 2*horizon/3)
			s.now += dt
			if s.pendW != 0 && s.now >= s.pendAt-1e-9 {
				s.takeOver()
				s.handle(c.Switched(s.scrape(), time.Duration((s.now-s.askedAt)*float64(time.Millisecond))))
			}
			if sampler != nil {
				s.handle(sampler.Sample(Scrape{Now: Start.Add(time.Duration(s.now * float64(time.Millisecond))), Engine: s.cur.gen, Width: s.cur.width,
					InFlight: float64(s.inFlight)}))
			}
		}
		s.handle(c.Scrape(s.scrape()))
	}
	c.Close()
	s.out.EndWidth = s.cur.width
	return s.out
}

// account serves dt ms of phase ph and adds it, and what the oracle and
// the default would have given, to the outcome.
func (s *sim) account(ph Phase, dt, z0 float64, end bool) {
	got, mean := s.serveStep(ph, dt)
	ref, ok := s.refs[ph]
	if !ok {
		for w := 1; w <= s.o.MaxWidth; w++ {
			ref[0] = math.Max(ref[0], phaseRate(s.p.Model, s.acc, ph, w, s.p.ReqTokens))
		}
		ref[1] = phaseRate(s.p.Model, s.acc, ph, s.p.Default, s.p.ReqTokens)
		if s.refs == nil {
			s.refs = map[Phase][2]float64{}
		}
		s.refs[ph] = ref
	}
	best, def := ref[0], ref[1]
	first := def / s.p.Model.EngineFactor(z0, s.p.Default, ph.Clients)
	sec := dt / 1000
	s.out.Tokens += got
	s.out.Mean += mean
	s.out.Oracle += best * sec
	s.out.Default += def * sec
	s.out.DefaultFirst += first * sec
	if end {
		s.out.EndMean += mean
		s.out.EndOracle += best * sec
		s.out.EndDefault += def * sec
	}
}

// serveStep serves dt ms of phase ph: each client's request on its
// engine (the engine a switch replaced finishes the requests it holds,
// then their clients move to the one serving). It returns the tokens the
// clients got, and the same on the mean engine (each engine's own effect
// taken out).
func (s *sim) serveStep(ph Phase, dt float64) (got, mean float64) {
	if len(s.clients) > ph.Clients {
		s.clients = s.clients[:ph.Clients]
	}
	k := map[*engine]int{}
	for _, cl := range s.clients {
		k[cl.eng]++
	}
	for len(s.clients) < ph.Clients {
		s.clients = append(s.clients, client{eng: s.cur, left: float64(s.p.ReqTokens), cls: s.classOf(ph)})
		k[s.cur]++
		s.cur.started(s.p.Model, k[s.cur])
	}
	legs := map[*engine]leg{}
	legOf := func(e *engine) leg {
		if g, ok := legs[e]; ok {
			return g
		}
		g := leg{m: s.p.Model, a: s.acc.at(ph.Class, k[e]), reqTokens: s.p.ReqTokens, k: max(1, k[e])}
		g.cyc = e.cycleMS(s.p.Model, g.k, s.cur.takeover, s.now, dt, s.rng)
		if e.stall > 0 { // a cold prefill holds every sequence on e
			x := min(e.stall, dt/2)
			e.stall -= x
			g.cyc *= dt / (dt - x)
		}
		e.c.Decodes += dt / g.cyc
		legs[e] = g
		return g
	}
	for i := range s.clients {
		cl := &s.clients[i]
		for rem := dt; rem > 1e-9; {
			g := legOf(cl.eng)
			if ph.Mixed { // each request its own class; otherwise the phase's
				g.a = s.acc.at(cl.cls, g.k)
			}
			tok, used, ended := cl.run(g, rem, s.rng)
			got += tok
			mean += tok * s.p.Model.EngineFactor(cl.eng.z, cl.eng.width, g.k)
			rem -= used
			if !ended {
				break
			}
			if cl.eng != s.cur {
				cl.eng = s.cur
				k[s.cur]++
			}
			cl.next(legOf(cl.eng), cl.eng.width, s.rng)
			cl.cls = s.classOf(ph)
			s.cur.started(s.p.Model, k[s.cur])
		}
	}
	return got, mean
}

// draining says whether a client's request is still on an engine a
// switch replaced.
func (s *sim) draining() bool {
	for _, cl := range s.clients {
		if cl.eng != s.cur {
			return true
		}
	}
	return false
}

// takeOver starts the engine a switch asked for: a fresh draw, the old
// engine draining beside it.
func (s *sim) takeOver() {
	s.cur = &engine{gen: s.cur.gen + 1, width: s.pendW, z: simcost.EngineDraw(s.rng.Uint64()), takeover: s.now}
	s.drainTo = s.now + s.p.Model.Drain.MS
	s.pendW = 0
	s.logf("%6.0fs width %d serves (engine %d)", s.now/1000, s.cur.width, s.cur.gen)
}

// handle carries out a controller's commands: a switch takes SwitchS,
// the old engine serving meanwhile; one asked for while another is under
// way, or for the width serving, is dropped.
func (s *sim) handle(cmds []Command) {
	for _, c := range cmds {
		if c.Switch < 1 {
			continue
		}
		if s.pendW != 0 || c.Switch == s.cur.width {
			s.logf("%6.0fs switch to %d dropped (%s)", s.now/1000, c.Switch, c.Reason)
			continue
		}
		w := min(c.Switch, s.o.MaxWidth)
		s.pendW, s.askedAt, s.pendAt = w, s.now, s.now+1000*s.p.SwitchS
		s.out.Switches = append(s.out.Switches, w)
		s.out.SettleS = s.now / 1000
		s.logf("%6.0fs switch %d → %d: %s", s.now/1000, s.cur.width, w, c.Reason)
	}
}

// scrape is what a scrape sees now.
func (s *sim) scrape() Scrape {
	var on []*client
	for i := range s.clients {
		if s.clients[i].eng == s.cur {
			on = append(on, &s.clients[i])
		}
	}
	proc := 0
	for _, cl := range on {
		if cl.decoding() {
			proc++
		}
	}
	return Scrape{Now: Start.Add(time.Duration(s.now * float64(time.Millisecond))), Engine: s.cur.gen, Width: s.cur.width,
		Shared: s.pendW != 0 || s.now < s.drainTo || s.draining(), InFlight: float64(s.inFlight), Processing: float64(proc), Slots: s.p.Slots,
		Counters: s.cur.c.clone()}
}

// probe is one probe of the serving engine: the verify ms of rows, idle,
// times the engine's effect with one sequence and the model's noise.
func (s *sim) probe(rows int) float64 {
	m := s.p.Model
	return m.VerifyRowsMS(max(1, rows)) * m.EngineFactor(s.cur.z, 2, 1) * math.Max(0.5, 1+m.Noise*s.rng.NormFloat64())
}

func (s *sim) logf(format string, args ...any) {
	if s.log != nil {
		s.log(fmt.Sprintf(format, args...))
	}
}

// phaseAt is the phase at virtual ms t, the phases repeating.
func phaseAt(ph []Phase, t float64) Phase {
	total := 0.0
	for _, p := range ph {
		total += float64(p.Dur / time.Millisecond)
	}
	if total <= 0 {
		return ph[0]
	}
	t = math.Mod(t, total)
	for _, p := range ph {
		if t -= float64(p.Dur / time.Millisecond); t < 0 {
			return p
		}
	}
	return ph[len(ph)-1]
}

// OracleWidths is the best fixed width of each phase of tr on p's mean
// engine, in order.
func OracleWidths(p Profile, tr Traffic, maxWidth int) []int {
	var ws []int
	for _, ph := range tr.Phases {
		acc := newAccepts(p, maxWidth)
		best, br := 1, 0.0
		for w := 1; w <= maxWidth; w++ {
			if r := phaseRate(p.Model, acc, ph, w, p.ReqTokens); r > br {
				best, br = w, r
			}
		}
		ws = append(ws, best)
	}
	return slices.Clip(ws)
}

// classOf is the class of a request sent in phase ph: a draw among the
// mixed classes when the phase is mixed (the only draw, so the other
// traffics' runs are as before).
func (s *sim) classOf(ph Phase) int {
	if ph.Mixed {
		return 2 + s.rng.IntN(len(mixedScale))
	}
	return ph.Class
}

// accepts are the acceptances by load and class: [n][cls], n the
// sequences decoding, 1 to 4.
type accepts [][]accept

// newAccepts is every class's acceptance on p's model at each load.
func newAccepts(p Profile, maxWidth int) accepts {
	acc := make(accepts, 5)
	for n := 1; n < len(acc); n++ {
		load := 1 + p.LoadAccept*float64(n-1)/3
		acc[n] = make([]accept, classes)
		for cls := range acc[n] {
			acc[n][cls] = newAccept(p.Model, classScale(cls)*load, maxWidth)
		}
	}
	return acc
}

// at is class cls's acceptance with n sequences decoding.
func (a accepts) at(cls, n int) *accept { return &a[min(max(n, 1), len(a)-1)][cls] }

// phaseRate is the mean engine's client tokens/s at width w in phase ph:
// a mixed phase's requests are the mixed classes in equal shares, so its
// rate is their harmonic mean (a request's time is what adds up).
func phaseRate(m simcost.Model, acc accepts, ph Phase, w, reqTokens int) float64 {
	if !ph.Mixed {
		return rate(m, acc.at(ph.Class, ph.Clients), w, ph.Clients, reqTokens)
	}
	inv := 0.0
	for cls := 2; cls < classes; cls++ {
		inv += 1 / rate(m, acc.at(cls, ph.Clients), w, ph.Clients, reqTokens)
	}
	return float64(classes-2) / inv
}
