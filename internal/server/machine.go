// Package server is serve's runtime: the engines it runs behind the proxy,
// as one explicit state machine.
//
// The core (this file) is pure: Step takes the machine, one event and the
// time, and returns the next machine and the actions to take. It does no
// I/O and reads no clock, so every transition, the race windows included
// (a request landing 1 ms after a switch, SIGTERM during a switch, an
// engine that exits while another starts), is a table test with a fake
// clock. The shell (shell.go) turns actions into process starts, proxy
// routing and signals, and turns what happens into events.
//
// The invariant: at most one engine serving (routed), at most one
// starting, at most one draining (finishing its requests before it stops).
package server

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/supervise"
)

// Phase is what the runtime as a whole is doing.
type Phase uint8

const (
	// Starting: no engine serves yet (the first start, or a restart after
	// a crash); requests are held.
	Starting Phase = iota
	// Serving: one engine serves; another may still be draining.
	Serving
	// Switching: a new engine is being started beside the serving one
	// (overlap), or the old one is draining while requests are held (drain).
	Switching
	// Stopping: a signal arrived; requests in flight finish, new ones are
	// refused, then the engines stop.
	Stopping
	// Stopped: every engine has exited; Exit was returned.
	Stopped
)

func (p Phase) String() string {
	return [...]string{"starting", "serving", "switching", "stopping", "stopped"}[p]
}

// Kind is why an engine is started.
type Kind uint8

const (
	KindStart   Kind = iota // the first engine
	KindReload              // the profile or policy changed
	KindAdapt               // the adaptive loop chose another width
	KindRestart             // the serving engine exited or hung
	KindFollow              // serve follows the width schedule to the bucket the load sits in
)

func (k Kind) String() string { return [...]string{"start", "reload", "adapt", "restart", "follow"}[k] }

// EngineID names one engine process the runtime started: 1, 2, …
type EngineID uint64

// Limits are the runtime settings of one plan; a switch takes its plan's.
type Limits struct {
	Restart         bool          // restart = "on-failure"
	DrainTimeout    time.Duration // how long an old engine may finish its requests
	ShutdownTimeout time.Duration // how long requests may finish after SIGTERM
	// The shell's, per engine as it started: SIGTERM's grace before
	// SIGKILL, and how long an engine may answer nothing (0: no check).
	StopTimeout time.Duration
	HangTimeout time.Duration
}

// Job is one request to run a plan: a reload, an adaptive switch, a
// restart or the first start.
type Job struct {
	Kind   Kind
	Mode   key.Switch // overlap, drain or direct (serve resolves auto); alone when nothing serves
	Plan   *plan.Plan
	Limits Limits
	Reason string
	// Reply, when set, receives the outcome (the adaptive loop waits on
	// it); the shell sends it exactly once, from a Reply action.
	Reply chan error
	// Origin is the submitter's own, given back with the job in the notes
	// (serve: the reading of the files the plan was built from, which
	// becomes the settings in force with it); the machine never reads it.
	Origin any
}

// Engine is one engine as the machine sees it.
type Engine struct {
	ID     EngineID
	Plan   *plan.Plan
	Limits Limits
	Since  time.Time // started (for backoff) — set when asked to start
}

// Machine is the runtime's whole state. The zero value is not ready: use
// NewMachine.
type Machine struct {
	Phase    Phase
	Serving  *Engine // routed; nil while nothing serves
	Starting *Engine // being started (ready, verified, probed); nil when none
	Draining *Engine // not routed, finishing its requests; nil when none

	// Job is the switch under way (its engine is Starting, or, in drain
	// and direct modes, the old engine is Draining first); nil when none.
	Job *Job
	// fellBack: Job's own plan failed and its previous plan is starting
	// again (nothing served meanwhile).
	fellBack bool
	jobErr   error
	// Pending is the latest switch asked for while Job ran (the latest
	// wins); it starts once Job and any drain are over.
	Pending *Job
	// pendingAt: when Pending was asked for; waited: how long Job waited
	// as Pending before it began (Switched.Waited).
	pendingAt time.Time
	waited    time.Duration
	// Plan is the plan in force: the serving engine's, or the last one
	// that served.
	Plan   *plan.Plan
	Limits Limits

	held      bool      // the proxy holds new requests
	restartAt time.Time // zero: no restart pending
	drainBy   time.Time // the draining engine is stopped at this time
	stopBy    time.Time // Stopping: requests are cut at this time
	stopping  []EngineID
	signals   int
	sig       os.Signal
	lastCode  int
	lastErr   error
	backoff   supervise.Backoff
	nextID    EngineID
	began     time.Time // when Job began
	// left: the engine a drain or direct switch took out of the route
	// (Switched.From once it is gone); drainTook: how long it drained.
	left      *Engine
	drainTook time.Duration
	cut       bool // Cut was sent
}

// NewMachine is the machine before the first engine starts: requests are
// held.
func NewMachine(p *plan.Plan, l Limits) Machine {
	return Machine{Phase: Starting, Plan: p, Limits: l, held: true,
		backoff: supervise.Backoff{Initial: time.Second, Max: 30 * time.Second, Reset: time.Minute}}
}

// Event is what happens to the runtime, Step's input. The set is closed
// (the unexported method): Step's type switch covers every event.
type Event interface{ event() }

func (Begin) event()    {}
func (Submit) event()   {}
func (Ready) event()    {}
func (Exited) event()   {}
func (Hung) event()     {}
func (Drained) event()  {}
func (Signal) event()   {}
func (Tick) event()     {}
func (Withdraw) event() {}

// Events.
type (
	// Begin starts the first engine.
	Begin struct{}
	// Submit asks for a switch to Job.Plan (checked by the shell first:
	// binary, model files and port exist).
	Submit struct{ Job *Job }
	// Ready: the engine started (ready, verified, probed), or failed to.
	Ready struct {
		ID  EngineID
		Err error
	}
	// Exited: the engine's process ended with Code.
	Exited struct {
		ID   EngineID
		Code int
		// Elsewhere: what ended it other than speclaunch's stop (a kill
		// from outside, a crash before the stop came), "" when the stop
		// was speclaunch's or none was sent. The shell reads it from the
		// signals it sent and the exit code.
		Elsewhere string
	}
	// Hung: the engine stopped answering its liveness check.
	Hung struct{ ID EngineID }
	// Drained: the engine has no request in flight (clients' and the
	// launcher's own).
	Drained struct{ ID EngineID }
	// Signal: SIGINT or SIGTERM (or the parent context ending, as SIGTERM).
	Signal struct{ Sig os.Signal }
	// Tick: a deadline the machine asked for (Deadline) has come.
	Tick struct{}
	// Withdraw: the files a job of Kind was built from no longer make it
	// (a later reading was rejected): such a job that waits (Pending) is
	// dropped; one under way goes on. Withdrawn answers on Dropped.
	Withdraw struct {
		Kind    Kind
		Dropped chan<- Withdrawal
	}
)

// Withdrawal is what a Withdraw did: Job is the waiting job it dropped
// (nil when none waited), UnderWay the switch under way then (nil when
// none ran, or a start or restart of the settings in force did), the
// latest job left whose switch has not ended. The front
// address bound ahead for the dropped job is the launcher's to give back.
type Withdrawal struct {
	Job, UnderWay *Job
}

// Action is one thing for the shell to do, Step's output. The set is
// closed (the unexported method): the shell's type switch covers every
// action.
type Action interface{ action() }

func (Start) action()     {}
func (Route) action()     {}
func (Hold) action()      {}
func (Watch) action()     {}
func (Stop) action()      {}
func (Gone) action()      {}
func (Refuse) action()    {}
func (Cut) action()       {}
func (Reply) action()     {}
func (Switched) action()  {}
func (Adopt) action()     {}
func (Log) action()       {}
func (Exit) action()      {}
func (Withdrawn) action() {}

// Actions.
type (
	// Start: start the engine, wait until it is ready, verify its width,
	// run the before-traffic probe; then send Ready.
	Start struct {
		Engine *Engine
		Kind   Kind
		Why    string
	}
	// Route: new and held requests go to the engine from now on.
	Route struct{ ID EngineID }
	// Hold: new requests wait (bounded by the proxy's queue and timeout).
	Hold struct{}
	// Watch: send Drained once the engine has no request in flight.
	// Before, Bound and Then say the wait, should it last (waitlog):
	// "N requests to finish on engine ID" + Before, up to Bound + Then.
	Watch struct {
		ID     EngineID
		Before string
		Bound  time.Duration
		Then   string
	}
	// Stop: signal the engine (SIGTERM or the signal received), SIGKILL
	// after its stop timeout, or SIGKILL now when Kill; then send Exited.
	// Gone: the proxy marks the engine gone first, so that a request that
	// has had no response byte from it is sent to the next engine.
	Stop struct {
		ID   EngineID
		Sig  os.Signal
		Kill bool
		Why  string
	}
	// Gone: the engine died or hung; requests without a response byte from
	// it go to the next engine, or, Last, none follows it (none starting,
	// no restart: speclaunch stops) and they get 503.
	Gone struct {
		ID   EngineID
		Last bool
	}
	// Refuse: the launcher is stopping: /health answers 503, new requests
	// get 503 with Retry-After; held ones stay held for an engine.
	Refuse struct{}
	// Cut: every engine is being stopped with its requests in flight (the
	// shutdown timeout passed, a second signal, a fatal exit): no engine
	// will come, so held requests and those the engines drop are answered
	// now (503), not after a wait to learn whether their engine is gone.
	// Cause is what the clients whose answers end so are told.
	Cut struct{ Cause proxy.Cause }
	// Reply: the job's outcome, to whoever waits on it. It follows the
	// job's Switched or Adopt, so that the launcher has taken the plan in
	// force before a waiter wakes: a follower that read the plan first saw
	// the one its own switch replaced and asked for the same switch again.
	Reply struct {
		Job *Job
		Err error
	}
	// Switched: a switch ended (OK or not), for the status history and
	// the metrics.
	Switched struct {
		Job *Job
		// From is the engine the switch replaced (in drain and direct
		// modes already stopped); To is nil when nothing serves after it.
		From, To *Engine
		OK       bool
		Err      error
		// Took runs from the switch's start to the new engine serving
		// (or failing): the switch alone, which the follower and the
		// adaptive loop price a switch by. Waited is how long it waited
		// before, asked for while another switch ran (0: it began at once).
		Took, Waited time.Duration
		Drain        time.Duration // drain mode: from the hold to the old engine's last request (or the drain timeout)
	}
	// Adopt: the plan takes effect without an engine switch (its engine
	// command equals the serving one's; the proxy's limits may differ).
	Adopt struct{ Job *Job }
	// Log: something the operator should read.
	Log struct {
		Level int // slog.Level values: -4 debug, 0 info, 4 warn, 8 error
		Msg   string
		Attrs []any
	}
	// Exit: the runtime is over; serve exits with Code (Err explains a
	// non-zero one).
	Exit struct {
		Code int
		Err  error
	}
	// Withdrawn answers a Withdraw on Dropped: the job it dropped (its
	// own Reply says ErrWithdrawn) and the one under way.
	Withdrawn struct {
		Dropped chan<- Withdrawal
		Withdrawal
	}
)

// Log levels, as slog's.
const (
	lvInfo  = 0
	lvWarn  = 4
	lvError = 8
)

// Why a Stop is sent, besides a switch's kind (reload, adapt, …): the
// shell logs a stop for shutdown ("engine stopped") apart from an old
// engine's ("old engine stopped").
const (
	// DrainTimedOut: the engine still had requests in flight when its
	// drain timeout ran out.
	DrainTimedOut = "drain timed out"
	WhyStopping   = "stopping"          // the launcher stops
	WhyFinished   = "requests finished" // the launcher stops; its requests ended
	WhyHung       = "hung"
)

// hungWhy is why speclaunch stopped an engine killed as hung, as the
// clients whose requests it ends read it (diedCause, the shell's stop).
const hungWhy = "it stopped answering its liveness check"

// ErrStopping answers switches asked for while the launcher stops.
var ErrStopping = errors.New("speclaunch is stopping")

// ErrSuperseded answers a pending switch replaced by a later one.
var ErrSuperseded = errors.New("superseded by a later switch")

// ErrWithdrawn answers a pending switch dropped by Withdraw.
var ErrWithdrawn = errors.New("dropped: the files no longer read that way")

// Deadline is the next time the machine wants a Tick; zero when none.
func (m Machine) Deadline() time.Time {
	var d time.Time
	for _, t := range []time.Time{m.restartAt, m.drainBy, m.stopBy} {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	return d
}

// Held reports whether the proxy holds new requests.
func (m Machine) Held() bool { return m.held }

// Step applies one event at time now.
func Step(m Machine, ev Event, now time.Time) (Machine, []Action) {
	s := &stepper{m: m, now: now}
	switch e := ev.(type) {
	case Begin:
		s.begin(&Job{Kind: KindStart, Plan: m.Plan, Limits: m.Limits, Reason: "start"})
	case Submit:
		s.submit(e.Job)
	case Ready:
		s.ready(e)
	case Exited:
		s.exited(e)
	case Hung:
		s.hung(e.ID)
	case Drained:
		s.drained(e.ID, false)
	case Signal:
		s.signal(e.Sig)
	case Tick:
		s.tick()
	case Withdraw:
		s.withdraw(e)
	}
	return s.m, s.out
}

type stepper struct {
	m   Machine
	now time.Time
	out []Action
}

func (s *stepper) do(a ...Action) { s.out = append(s.out, a...) }

func (s *stepper) log(level int, msg string, attrs ...any) {
	s.do(Log{Level: level, Msg: msg, Attrs: attrs})
}

func (s *stepper) newEngine(p *plan.Plan, l Limits) *Engine {
	s.m.nextID++
	return &Engine{ID: s.m.nextID, Plan: p, Limits: l, Since: s.now}
}

func (s *stepper) hold() {
	if !s.m.held {
		s.m.held = true
		s.do(Hold{})
	}
}

// begin starts job j's engine (overlap, restart, first start), or, in
// drain and direct modes with an engine serving, first takes the serving
// engine out of the route and drains it.
func (s *stepper) begin(j *Job) {
	m := &s.m
	m.Job, m.fellBack, m.jobErr, m.began, m.waited = j, false, nil, s.now, 0
	m.left, m.drainTook = nil, 0
	m.restartAt = time.Time{}
	if m.Phase != Stopping {
		m.Phase = Switching
		if m.Serving == nil {
			m.Phase = Starting
		}
	}
	if m.Serving != nil && j.Mode != key.SwitchOverlap {
		old := m.Serving
		m.Serving, m.Draining, m.left = nil, old, old
		if j.Mode == key.SwitchDirect {
			s.do(Stop{ID: old.ID, Why: j.Kind.String()})
			m.stopping = append(m.stopping, old.ID)
			return
		}
		s.hold()
		m.drainBy = s.now.Add(old.Limits.DrainTimeout)
		s.do(Watch{ID: old.ID, Before: " before it is stopped for the new engine (new requests wait)", Bound: old.Limits.DrainTimeout, Then: ", then it is stopped with them"})
		return
	}
	s.start(j.Plan, j.Limits, j)
}

func (s *stepper) start(p *plan.Plan, l Limits, j *Job) {
	e := s.newEngine(p, l)
	s.m.Starting = e
	s.do(Start{Engine: e, Kind: j.Kind, Why: j.Reason})
}

// submit takes a switch request: at once when nothing else runs, else as
// the pending one (the latest wins).
func (s *stepper) submit(j *Job) {
	m := &s.m
	switch {
	case m.Phase == Stopping || m.Phase == Stopped:
		s.do(Reply{Job: j, Err: ErrStopping})
	case m.Job != nil || m.Draining != nil:
		if m.Pending != nil {
			s.do(Reply{Job: m.Pending, Err: ErrSuperseded})
		}
		m.Pending, m.pendingAt = j, s.now
		under := "a switch is under way"
		if m.Job != nil && (m.Job.Kind == KindStart || m.Job.Kind == KindRestart) {
			under = "an engine is starting" // the first, or a restart: no switch
		}
		s.log(lvInfo, under+"; the new settings apply after it", "why", j.Reason)
	case m.Serving != nil && samePlan(j.Plan, m.Plan):
		s.adopt(j)
	case m.Serving == nil && samePlan(j.Plan, m.Plan):
		// A crash's back-off, these very settings: the restart at its end
		// runs them. Starting now skipped the back-off, so a reload storm
		// (SIGHUPs, an editor's saves) restarted a crashing engine at once.
		m.Plan, m.Limits = j.Plan, j.Limits
		s.log(lvInfo, "the engine asked for restarts with these settings once its back-off ends", "why", j.Reason)
		s.do(Adopt{Job: j}, Reply{Job: j})
	case m.Serving == nil:
		// Nothing serves (restarting after a crash): start the new
		// settings now, with the previous ones as the fallback.
		j.Mode = key.SwitchAlone
		s.begin(j)
	default:
		attrs := []any{"mode", j.Mode.String(), "why", j.Reason}
		if j.Kind == KindAdapt || j.Kind == KindFollow {
			attrs[2], attrs[3] = "kind", j.Kind.String() // the adaptive loop's or the follower's line said why when it asked
		}
		if j.Mode == key.SwitchDrain {
			// The wait a drain makes, and its bound, said up front.
			attrs = append(attrs, "holds_new_requests", "until the serving engine's requests finish, at most "+m.Serving.Limits.DrainTimeout.String())
		}
		s.log(lvInfo, "switching engines", attrs...)
		s.begin(j)
	}
}

// ready takes the outcome of a start.
func (s *stepper) ready(e Ready) {
	m := &s.m
	st := m.Starting
	if st == nil || st.ID != e.ID {
		return // a start cancelled by a signal or a crash: its Stop is under way
	}
	m.Starting = nil
	if e.Err != nil {
		s.startFailed(st, e.Err)
		return
	}
	j := m.Job
	old := m.Serving
	m.Serving = st
	m.Plan, m.Limits = st.Plan, st.Limits
	m.held = false
	// A death before this engine (a crash or a hang restarted, the serving
	// engine killed during a switch) was recovered from: it is no longer
	// the launcher's exit code. Only the engine whose death ends the run
	// gives its code (servingDied, hung); a later stop exits 0 (serve
	// makes a cut 4).
	m.lastCode, m.lastErr = 0, nil
	s.do(Route{ID: st.ID})
	if old != nil {
		m.Draining = old
		m.drainBy = s.now.Add(old.Limits.DrainTimeout)
		s.do(Watch{ID: old.ID, Before: ", the old engine, before it is stopped", Bound: old.Limits.DrainTimeout, Then: ", then it is stopped with them"})
	}
	if j != nil && j.Kind != KindStart {
		err := error(nil)
		if m.fellBack {
			err = m.jobErr
		}
		s.do(Switched{Job: j, From: cmp.Or(old, m.left), To: st, OK: !m.fellBack, Err: err, Took: s.now.Sub(m.began), Waited: m.waited, Drain: m.drainTook}, Reply{Job: j, Err: err})
	}
	m.Job, m.fellBack, m.jobErr, m.left = nil, false, nil, nil
	if m.Phase == Stopping {
		s.drainForStop()
		return
	}
	m.Phase = Serving
	s.next()
}

// startFailed: the old engine keeps serving (overlap), or the previous
// settings start again (nothing serves), or the restart policy applies.
func (s *stepper) startFailed(st *Engine, err error) {
	m := &s.m
	j := m.Job
	if m.Phase == Stopping {
		if j != nil {
			s.do(Reply{Job: j, Err: err})
			m.Job = nil
		}
		s.maybeExit()
		return
	}
	if m.Serving != nil {
		s.log(lvError, "the new engine failed to start; the old one keeps serving", "why", j.Reason, "err", err)
		s.do(Switched{Job: j, From: m.Serving, OK: false, Err: err, Took: s.now.Sub(m.began), Waited: m.waited}, Reply{Job: j, Err: err})
		m.Job, m.Phase = nil, Serving
		s.next()
		return
	}
	// Nothing serves.
	if j != nil && j.Kind != KindStart && !m.fellBack && m.Plan != nil && m.Plan != j.Plan {
		s.log(lvError, "engine with the new settings failed; going back to the previous ones", "err", err)
		m.fellBack, m.jobErr = true, err
		s.start(m.Plan, m.Limits, j)
		return
	}
	if j != nil && j.Kind != KindStart {
		s.do(Switched{Job: j, From: m.left, OK: false, Err: err, Took: s.now.Sub(m.began), Waited: m.waited, Drain: m.drainTook}, Reply{Job: j, Err: err})
	}
	m.Job = nil
	m.lastErr = err
	if m.Pending != nil && !samePlan(m.Pending.Plan, m.Plan) {
		// An edit waited for this start: its settings go next. The ones
		// that failed were retried with back-off and the edit lost (or,
		// without a restart policy, the launcher exited with it unread).
		s.log(lvError, "engine failed to start; starting the settings that waited for it", "err", err)
		s.next()
		return
	}
	if !m.Limits.Restart {
		if c, ok := startCause(err); ok {
			s.cutOnce(c)
		}
		s.exit(2, err)
		return
	}
	wait := m.backoff.Next(s.now.Sub(st.Since))
	s.log(lvError, "engine failed to start; retrying", "err", err, "backoff", wait.String())
	m.restartAt = s.now.Add(wait)
	m.Phase = Starting
}

// withdraw drops the waiting job of w's kind: the latest reading of the
// files wins, and a rejected one makes no switch, so the edit that waited
// for the switch under way would have applied settings the files no
// longer hold (its reload then counted applied though the last one read
// rejected). A job under way is not undone.
func (s *stepper) withdraw(w Withdraw) {
	m := &s.m
	var j *Job
	if m.Pending != nil && m.Pending.Kind == w.Kind {
		j, m.Pending = m.Pending, nil
		s.do(Reply{Job: j, Err: ErrWithdrawn})
	}
	var under *Job
	if m.Job != nil && m.Job.Kind != KindStart {
		under = m.Job
	}
	s.do(Withdrawn{Dropped: w.Dropped, Withdrawal: Withdrawal{Job: j, UnderWay: under}})
}

// next starts the pending switch once nothing else runs.
func (s *stepper) next() {
	m := &s.m
	if m.Pending == nil || m.Job != nil || m.Draining != nil || m.Phase == Stopping {
		return
	}
	j := m.Pending
	m.Pending = nil
	s.submit(j)
	if m.Job == j {
		m.waited = s.now.Sub(m.pendingAt)
	}
}

// adopt takes in a job whose engine command is the serving one's.
func (s *stepper) adopt(j *Job) {
	s.m.Plan, s.m.Limits = j.Plan, j.Limits
	s.m.Serving.Limits = j.Limits
	s.do(Adopt{Job: j}, Reply{Job: j})
}

// samePlan: the two plans start the same engine command.
func samePlan(a, b *plan.Plan) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return plan.SameEngine(a, b)
}

// exited takes an engine's end.
func (s *stepper) exited(e Exited) {
	m := &s.m
	asked := slices.Contains(m.stopping, e.ID) // told to stop: not a crash
	m.stopping = slices.DeleteFunc(m.stopping, func(x EngineID) bool { return x == e.ID })
	switch {
	case m.Draining != nil && m.Draining.ID == e.ID:
		m.Draining, m.drainBy = nil, time.Time{}
		if !asked {
			// It died while it drained (a crash, a kill from outside):
			// its requests without a response byte go to the next engine
			// now, not after the proxy's wait to learn it is gone.
			level := lvInfo
			if e.Code != 0 {
				level = lvError
			}
			s.log(level, "the old engine exited while it drained; its requests that had no answer yet go to the next engine", "engine_n", e.ID, "exit_code", e.Code)
			s.do(Gone{ID: e.ID})
		}
		if m.Job != nil && m.Starting == nil && m.Serving == nil && m.Phase != Stopping {
			// Drain or direct switch: the old engine is gone; now the new.
			s.start(m.Job.Plan, m.Job.Limits, m.Job)
		}
		if m.Phase == Stopping {
			s.maybeExit()
			return
		}
		s.next()
	case m.Starting != nil && m.Starting.ID == e.ID:
		// The start reports its own failure (Ready with an error).
	case m.Serving != nil && m.Serving.ID == e.ID && asked && m.Phase == Stopping && e.Elsewhere == "":
		// Stopped by the launcher's own stop (a signal, the shutdown or
		// stop timeout's kill): its code is not the launcher's; requests
		// it cut make the exit 4 (serve's cutExit), none make it 0.
		m.Serving = nil
		s.maybeExit()
	case m.Serving != nil && m.Serving.ID == e.ID:
		// Told to stop outside a shutdown, it was killed as hung.
		s.servingDied(e.Code, fmt.Sprintf("engine exited with code %d", e.Code), diedCause(e.Code, asked))
	default:
		if m.Phase == Stopping {
			s.maybeExit()
		}
	}
}

// hung: an engine that does not answer is taken as failed: killed, and
// the restart policy applies.
func (s *stepper) hung(id EngineID) {
	m := &s.m
	for _, e := range []*Engine{m.Serving, m.Draining} {
		if e != nil && e.ID == id {
			// engine_n is the launcher's count, as in the "engine N |"
			// prefix of the engine's output; the pid is on its start line.
			s.log(lvError, "engine stopped answering; killing it", "engine_n", id)
			s.do(Gone{ID: id, Last: e == m.Serving && s.lastOne(137)}, Stop{ID: id, Kill: true, Why: WhyHung})
			m.stopping = append(m.stopping, id)
			if e == m.Serving {
				m.lastCode = 137
			}
			return
		}
	}
}

// diedCause is what the clients of a serving engine that ended are told
// when no engine follows it: killed as hung (hung), or exited with code.
func diedCause(code int, hung bool) proxy.Cause {
	if hung {
		return stoppedBy(hungWhy)
	}
	return proxy.Cause{What: fmt.Sprintf("the engine exited with code %d", code)}
}

// startCause is what the held requests are told when a start failed and
// no engine follows it, where "the engine exited" (the exit's own close)
// would be wrong: an engine not ready within the ready timeout did not
// exit, speclaunch stopped it, as a signal during a load is said.
func startCause(err error) (proxy.Cause, bool) {
	var te *supervise.TimeoutError
	if errors.As(err, &te) {
		return stoppedBy(fmt.Sprintf("it was not ready within the ready timeout, %s", te.After)), true
	}
	return proxy.Cause{}, false
}

// servingDied: requests are held for the next engine; the restart policy
// decides whether one comes; if none does, cut is what their clients are
// told.
func (s *stepper) servingDied(code int, why string, cut proxy.Cause) {
	m := &s.m
	dead := m.Serving
	m.Serving = nil
	m.lastCode, m.lastErr = code, nil // a crash after serving: an earlier start's failure is past
	if m.Phase == Stopping {
		s.maybeExit()
		return
	}
	s.hold()
	s.do(Gone{ID: dead.ID, Last: s.lastOne(code)})
	switch {
	case m.Starting != nil:
		s.log(lvError, "engine exited during a switch; requests wait for the new engine", "exit_code", code)
	case s.restarts(code):
		wait := m.backoff.Next(s.now.Sub(dead.Since))
		s.log(lvError, "engine exited; restarting", "exit_code", code, "backoff", wait.String())
		m.restartAt = s.now.Add(wait)
		m.Phase = Starting
	case code != 0:
		s.log(lvError, "engine exited", "exit_code", code)
		s.stopAllThenExit(code, fmt.Errorf("%s", why), cut)
	default:
		s.log(lvInfo, "engine exited", "exit_code", 0)
		s.stopAllThenExit(0, nil, cut)
	}
}

// restarts says the restart policy starts an engine again after the
// serving one ended with code (one killed for hanging reads 137).
func (s *stepper) restarts(code int) bool { return code != 0 && s.m.Limits.Restart }

// lastOne says no engine follows the serving one should it end with code:
// none is starting and the restart policy starts none, so speclaunch stops.
func (s *stepper) lastOne(code int) bool { return s.m.Starting == nil && !s.restarts(code) }

// drained: the draining engine finished its requests (or its time ran
// out): stop it.
func (s *stepper) drained(id EngineID, timedOut bool) {
	m := &s.m
	if m.Phase == Stopping {
		if m.Serving != nil && m.Serving.ID == id {
			s.stopEngine(m.Serving, WhyFinished)
			return
		}
	}
	if m.Draining == nil || m.Draining.ID != id || slices.Contains(m.stopping, id) {
		return
	}
	m.drainBy = time.Time{}
	if m.Job != nil && m.left == m.Draining {
		m.drainTook = s.now.Sub(m.began)
	}
	why := s.jobKind()
	if timedOut {
		why = DrainTimedOut
		// Stopped with requests in flight: those it has not begun to
		// answer go to the next engine (Gone first, so that the proxy
		// knows as the engine's connections close).
		s.do(Gone{ID: id})
	}
	s.stopEngine(m.Draining, why)
}

func (s *stepper) jobKind() string {
	if s.m.Job != nil {
		return s.m.Job.Kind.String()
	}
	return "replaced"
}

func (s *stepper) stopEngine(e *Engine, why string) {
	if slices.Contains(s.m.stopping, e.ID) {
		return
	}
	s.m.stopping = append(s.m.stopping, e.ID)
	s.do(Stop{ID: e.ID, Sig: s.m.sig, Why: why})
}

// signal: the first SIGINT/SIGTERM stops gracefully, the second stops the
// engines at once, the third kills them.
func (s *stepper) signal(sig os.Signal) {
	m := &s.m
	m.signals++
	if m.sig == nil {
		m.sig = sig
	}
	switch {
	case m.Phase == Stopped:
	case m.signals == 1:
		s.graceful()
	case m.signals == 2:
		s.log(lvWarn, "second signal: stopping the engines now", "signal", sigName(sig))
		m.stopBy = time.Time{}
		s.stopAll(false, stoppedBy("a second signal came"))
	default:
		s.log(lvWarn, "killing the engines", "signal", sigName(sig))
		s.stopAll(true, stoppedBy("a third signal came"))
	}
}

// graceful: readiness goes 503 and new requests are refused; requests in
// flight and held ones finish up to the shutdown timeout.
func (s *stepper) graceful() {
	m := &s.m
	backoff := !m.restartAt.IsZero() && m.Serving == nil && m.Starting == nil
	m.Phase = Stopping
	m.restartAt = time.Time{}
	m.stopBy = s.now.Add(m.Limits.ShutdownTimeout)
	s.do(Refuse{})
	s.log(lvInfo, "stopping: requests in flight may finish; new ones get 503", "signal", sigName(m.sig), "shutdown_timeout", m.Limits.ShutdownTimeout.String())
	if backoff {
		// The engine crashed and waits its back-off: no engine runs, so
		// the launcher exits now, as a shell does, with 128+signal (the
		// crash's code would read as the launcher's own death).
		last := fmt.Sprintf("exiting with code %d", m.lastCode)
		if m.lastErr != nil { // its start failed, not a serving engine
			last = fmt.Sprintf("failing to start (%v)", m.lastErr)
		}
		s.log(lvInfo, "stopping: no engine runs (it was waiting to start again after "+last+"); held requests get 503")
		// Their clients are told the signal, not last: a failed start's
		// error is the log's (internal text, paths included, is no
		// client's).
		s.interrupted("the engine waited to start again", " after "+last)
	}
	if m.Pending != nil {
		s.do(Reply{Job: m.Pending, Err: ErrStopping})
		m.Pending = nil
	}
	if m.Starting != nil && m.Serving != nil {
		// An overlap switch: the serving engine takes the requests; the
		// new one is not needed.
		st := m.Starting
		m.Starting = nil
		s.stopEngine(st, WhyStopping)
		if m.Job != nil {
			s.log(lvInfo, "stopping: the switch under way is abandoned; its new engine is stopped and the serving one finishes the requests", "why", m.Job.Reason)
			s.do(Reply{Job: m.Job, Err: ErrStopping})
			m.Job = nil
		}
	}
	if j := m.Job; j != nil && j.Mode == key.SwitchDrain && m.Serving == nil && m.Starting == nil && m.Draining != nil && m.left == m.Draining {
		s.abandonDrain()
	}
	if m.Serving == nil && m.Starting != nil {
		// Nothing serves (the first load, a restart, a drain switch): a
		// model load can take minutes, so the signal stops it now; held
		// requests get 503 (they had no byte: the client may retry).
		// Like a shell, the launcher then exits with 128+signal.
		st := m.Starting
		m.Starting = nil
		if m.Job != nil && m.Job.Kind != KindStart {
			s.log(lvInfo, "stopping: the switch under way is abandoned; its new engine is stopped", "why", m.Job.Reason)
		}
		s.interrupted("the engine was starting", "; it was stopped")
		s.stopEngine(st, WhyStopping)
	}
	s.drainForStop()
}

// abandonDrain: SIGTERM in a drain switch's drain phase (the old engine
// finishes its requests, new ones are held, the new engine is not
// started). The switch is abandoned; the old engine, alive and running the
// settings in force, serves again, so the held requests go to it and
// finish within the shutdown timeout, as in any stop. If the drain timeout
// already stopped it, no engine will come (none is started while
// stopping): the held requests get 503.
func (s *stepper) abandonDrain() {
	m := &s.m
	old := m.Draining
	if slices.Contains(m.stopping, old.ID) {
		s.log(lvInfo, "stopping: the switch under way is abandoned; its old engine is being stopped already and no new one starts, so held requests get 503", "why", m.Job.Reason)
		// The exit code is set before the old engine's exit, whose cut
		// requests would make a 0 into 4.
		s.interrupted("the engine was being switched", "; no engine serves")
	} else {
		s.log(lvInfo, "stopping: the switch under way is abandoned; the old engine, still draining, serves again and takes the held requests", "why", m.Job.Reason)
		m.Serving, m.Draining, m.left = old, nil, nil
		m.drainBy, m.held = time.Time{}, false
		s.do(Route{ID: old.ID})
	}
	s.do(Reply{Job: m.Job, Err: ErrStopping})
	m.Job = nil
}

// drainForStop watches the serving engine; it is stopped once it has no
// request in flight.
func (s *stepper) drainForStop() {
	m := &s.m
	if m.Serving != nil {
		w := Watch{ID: m.Serving.ID, Before: " before speclaunch stops it and exits"}
		if !m.stopBy.IsZero() {
			w.Bound, w.Then = m.stopBy.Sub(s.now), ", then they are cut"
		}
		s.do(w)
	}
	s.maybeExit()
}

// tick: a deadline came.
func (s *stepper) tick() {
	m := &s.m
	now := s.now
	if !m.restartAt.IsZero() && !now.Before(m.restartAt) {
		m.restartAt = time.Time{}
		if m.Serving == nil && m.Starting == nil && m.Phase != Stopping {
			s.begin(&Job{Kind: KindRestart, Mode: key.SwitchAlone, Plan: m.Plan, Limits: m.Limits, Reason: "the engine exited"})
		}
	}
	if !m.drainBy.IsZero() && !now.Before(m.drainBy) && m.Draining != nil {
		s.drained(m.Draining.ID, true)
	}
	if !m.stopBy.IsZero() && !now.Before(m.stopBy) && m.Phase == Stopping {
		m.stopBy = time.Time{}
		s.log(lvWarn, "shutdown timeout: stopping the engines with requests still in flight", "shutdown_timeout", m.Limits.ShutdownTimeout.String())
		s.stopAll(false, stoppedBy("the shutdown timeout passed"))
	}
}

// interrupted: the signal came while nothing served and no engine will
// come for the held requests (a crashed engine's back-off, an engine
// loading with nothing serving, a drain switch's old engine stopped):
// they are cut, told the signal and while what (the shell's close at
// exit said "the engine exited" of an engine speclaunch stopped), and
// the launcher exits as a shell does, 128+signal, its error saying
// while what and more.
func (s *stepper) interrupted(while, more string) {
	m := &s.m
	s.cutOnce(stoppedBy("a " + sigName(m.sig) + " came while " + while))
	if n, ok := m.sig.(syscall.Signal); ok {
		m.lastCode, m.lastErr = 128+int(n), fmt.Errorf("interrupted (%s) while %s%s", sigName(m.sig), while, more)
	}
}

// cutOnce sends a stop's one Cut, with what its clients are told.
func (s *stepper) cutOnce(c proxy.Cause) {
	if !s.m.cut {
		s.m.cut = true
		s.do(Cut{Cause: c})
	}
}

// stoppedBy is the cause of a cut that speclaunch's stop makes.
func stoppedBy(why string) proxy.Cause {
	return proxy.Cause{What: "speclaunch stopped the engine", Why: why}
}

// stopAll stops every engine now (requests in flight are cut, told cut).
func (s *stepper) stopAll(kill bool, cut proxy.Cause) {
	m := &s.m
	if m.Phase != Stopping {
		m.Phase = Stopping
		s.do(Refuse{})
	}
	s.cutOnce(cut)
	for _, e := range []*Engine{m.Starting, m.Serving, m.Draining} {
		if e == nil {
			continue
		}
		if kill || !slices.Contains(m.stopping, e.ID) {
			if !slices.Contains(m.stopping, e.ID) {
				m.stopping = append(m.stopping, e.ID)
			}
			s.do(Stop{ID: e.ID, Sig: m.sig, Kill: kill, Why: WhyStopping})
		}
	}
	if m.Job != nil {
		s.do(Reply{Job: m.Job, Err: ErrStopping})
		m.Job = nil
	}
	s.maybeExit()
}

// stopAllThenExit: the serving engine ended by itself; stop the rest and
// exit with its code.
func (s *stepper) stopAllThenExit(code int, err error, cut proxy.Cause) {
	s.m.lastCode, s.m.lastErr = code, err
	s.stopAll(false, cut)
}

// maybeExit ends the runtime once, stopping, no engine is left. An engine
// that serves and has been told to stop, or is starting before the
// deadline (it may still take held requests), keeps it waiting.
func (s *stepper) maybeExit() {
	m := &s.m
	if m.Phase != Stopping {
		return
	}
	if len(m.stopping) > 0 || m.Draining != nil {
		return
	}
	if m.Serving != nil || (m.Starting != nil && !m.stopBy.IsZero()) {
		return
	}
	if m.Starting != nil {
		// Past the deadline with an engine still starting: stop it.
		s.stopEngine(m.Starting, WhyStopping)
		m.Starting = nil
		return
	}
	if m.Job != nil {
		s.do(Reply{Job: m.Job, Err: ErrStopping})
		m.Job = nil
	}
	code, err := m.lastCode, m.lastErr
	m.Phase = Stopped
	m.stopBy, m.drainBy, m.restartAt = time.Time{}, time.Time{}, time.Time{}
	s.do(Exit{Code: code, Err: err})
}

func (s *stepper) exit(code int, err error) {
	s.m.lastCode, s.m.lastErr = code, err
	s.m.Phase = Stopping
	s.maybeExit()
}

func sigName(sig os.Signal) string {
	if sig == nil {
		return "none"
	}
	if sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	if sig == os.Interrupt {
		return "SIGINT"
	}
	return sig.String()
}
