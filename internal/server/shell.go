package server

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/speclaunch/speclaunch/internal/netfail"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/supervise"
	"github.com/speclaunch/speclaunch/internal/waitlog"
)

// Instance is one engine process the runtime started.
type Instance struct {
	ID      EngineID
	Plan    *plan.Plan // as the operator sees it (the public address)
	Proc    *supervise.Process
	Backend *proxy.Backend // nil in direct mode (no proxy)
	BaseURL string         // where the engine itself answers
	Port    int            // the engine's own port
	Since   time.Time
	// Info is what the launcher learned starting it (the width check),
	// for the status page.
	Info any
}

// Launcher is the runtime's one window on serve's launcher (package serve):
// it starts engines and hears what happened.
type Launcher interface {
	// Launch starts p's engine (the runtime's engine id), waits until it
	// is ready and verifies its width; interrupt ends the wait (the engine
	// is then stopped). On an error the engine process, if any, has been
	// stopped, and the Instance returned holds it (its Proc; nil where no
	// process began), so that its exit code can be said.
	Launch(ctx context.Context, p *plan.Plan, id EngineID, kind Kind, interrupt context.Context) (*Instance, error)
	// BeforeTraffic runs on every new engine after Launch and before the
	// proxy routes a request to it (the adaptive loop's probe: the engine
	// is idle then). An error is logged; the engine serves all the same.
	BeforeTraffic(ctx context.Context, in *Instance) error
	// Notify tells what happened (a Note). NoteExited comes from the
	// engine's own goroutine, NoteStopping from one of its own (it may
	// wait on a reply from the runtime); the others from the runtime's.
	Notify(n Note)
}

// Note is what the runtime tells the launcher. The set is closed (the
// unexported method).
type Note interface{ note() }

type (
	// NoteServing: the engine takes the traffic now.
	NoteServing struct{ In *Instance }
	// NoteSwitched: a switch ended (Switched.From names the engine it
	// replaced); To is the engine serving after it, nil when none does.
	NoteSwitched struct {
		Switched
		To *Instance
	}
	// NoteAdopted: a plan took effect without a switch.
	NoteAdopted struct{ Job *Job }
	// NoteStopping: the first signal arrived.
	NoteStopping struct{}
	// NoteExited: an engine's process ended.
	NoteExited struct {
		In   *Instance
		Code int
	}
	// NotePhase: the runtime's state changed.
	NotePhase struct{ Phase Phase }
)

func (NoteServing) note()  {}
func (NoteSwitched) note() {}
func (NoteAdopted) note()  {}
func (NoteStopping) note() {}
func (NoteExited) note()   {}
func (NotePhase) note()    {}

// Options configure a Runtime.
type Options struct {
	Plan   *plan.Plan
	Limits Limits       // Plan's
	Proxy  *proxy.Proxy // nil: direct mode, the engine on the public address
	Log    *slog.Logger
	// Signals are SIGINT and SIGTERM; Done ends the runtime as SIGTERM
	// does (the parent ends).
	Signals <-chan os.Signal
	Done    <-chan struct{}
	// Launcher starts the engines and hears what happened; Run needs it.
	Launcher Launcher
	// Clock times the waits said in the log (waitlog); nil: the wall clock.
	Clock waitlog.Clock
}

// Runtime is the shell around Machine: it runs the actions and turns what
// happens into events, on one goroutine (Run).
type Runtime struct {
	o      Options
	events chan Event
	ended  chan struct{} // closed when Run returns: no event is read any more

	mu      sync.Mutex
	engines map[EngineID]*live
	serving EngineID
	cut     int    // requests in flight when the engines were stopped under them
	cutWhy  string // why they were (the cut's cause: "the shutdown timeout passed", …)
	// waiting ends the wait of a switch asked for while another ran
	// (Machine.Pending), said should it last; nil when none waits.
	waiting func()
}

type live struct {
	inst   *Instance
	plan   *plan.Plan
	limits Limits          // as it started (its stop and hang timeouts)
	ctx    context.Context // ends when the engine is told to stop
	cancel context.CancelFunc
	drain  time.Time // when its drain began
	why    string    // why it was told to stop; "" while it was not
	sent   sent      // what speclaunch's stop sent it: its exit is told apart from another's
	// checked: its liveness check runs (it started when the engine was
	// first routed; one routed again keeps it).
	checked bool
	// unwatch ends its drain watch (Watch), its wait said no more; nil
	// when none runs. Routing the engine ends it: it no longer drains.
	unwatch context.CancelFunc
}

// New makes a runtime; Run starts it.
func New(o Options) *Runtime {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Runtime{o: o, events: make(chan Event, 64), ended: make(chan struct{}), engines: map[EngineID]*live{}}
}

// Submit asks for a switch; safe from any goroutine. j.Reply, when set,
// gets the outcome (buffer it: the runtime does not wait).
func (r *Runtime) Submit(j *Job) { r.events <- Submit{Job: j} }

// Withdraw drops the switch of kind k that waits for the one under way,
// if one does (Machine.Pending), and reports the job it dropped and the
// one under way; safe from any goroutine. Once the runtime has ended
// nothing waits: none.
func (r *Runtime) Withdraw(k Kind) Withdrawal {
	dropped := make(chan Withdrawal, 1)
	select {
	case r.events <- Withdraw{Kind: k, Dropped: dropped}:
	case <-r.ended:
		return Withdrawal{}
	}
	select {
	case d := <-dropped:
		return d
	case <-r.ended:
		return Withdrawal{}
	}
}

// Current is the engine that serves now; nil while none does.
func (r *Runtime) Current() *Instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.engines[r.serving]; l != nil {
		return l.inst
	}
	return nil
}

// Beside counts the engines alive beside the serving one (all of them
// while none serves): one draining after a switch, one starting for a
// switch or a reload. They share its GPU until their processes end.
func (r *Runtime) Beside() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.engines)
	if r.engines[r.serving] != nil {
		n--
	}
	return n
}

// Run starts the first engine and runs until the runtime stops; it returns
// the exit code and, for a non-zero one, why.
func (r *Runtime) Run() (int, error) {
	defer close(r.ended)
	m := NewMachine(r.o.Plan, r.o.Limits)
	m, acts := Step(m, Begin{}, time.Now())
	sigs, done := r.o.Signals, r.o.Done
	var timer *time.Timer
	var timerC <-chan time.Time
	var exited []EngineID // forgotten once the actions that name them ran
	for {
		exit, ok := r.exec(acts)
		r.mu.Lock()
		for _, id := range exited {
			delete(r.engines, id)
		}
		r.mu.Unlock()
		exited = exited[:0]
		if ok {
			if r.o.Proxy != nil {
				// Held requests get 503: no engine will come. A Cut closed
				// it already where speclaunch stopped an engine under its
				// requests; else one left unanswered was on an engine that
				// ended by itself.
				r.o.Proxy.Close(proxy.Cause{What: "the engine exited"})
			}
			r.pending(nil, nil) // a switch still pending waits no more
			return exit.Code, exit.Err
		}
		if timer != nil {
			timer.Stop()
			timer, timerC = nil, nil
		}
		if d := m.Deadline(); !d.IsZero() {
			timer = time.NewTimer(time.Until(d))
			timerC = timer.C
		}
		var ev Event
		select {
		case ev = <-r.events:
		case s := <-sigs:
			ev = Signal{Sig: s}
		case <-done:
			done = nil
			ev = Signal{Sig: os.Interrupt}
		case <-timerC:
			ev = Tick{}
		}
		if r.stale(ev) {
			acts = nil
			continue
		}
		prev := m.Phase
		m, acts = Step(m, ev, time.Now())
		if m.Phase != prev {
			r.o.Launcher.Notify(NotePhase{Phase: m.Phase})
		}
		r.pending(m.Pending, m.Serving)
		if e, ok := ev.(Exited); ok {
			exited = append(exited, e.ID)
		}
	}
}

// pending says a switch that waits for the one under way (a reload during
// a switch), should the wait last; it has no bound of its own: the switch
// under way says its own waits and bounds. With nothing serving, what is
// under way is an engine's start (the first, or a restart's), not a
// switch.
func (r *Runtime) pending(j *Job, serving *Engine) {
	switch {
	case j != nil && r.waiting == nil:
		what := "the switch under way to end before the one asked for during it"
		if serving == nil {
			what = "the engine starting to serve before the settings asked for during its start"
		}
		r.waiting = waitlog.Start(r.o.Log, r.o.Clock, waitlog.For(fmt.Sprintf("%s (%s)", what, j.Reason), 0, ""))
	case j == nil && r.waiting != nil:
		r.waiting()
		r.waiting = nil
	}
}

// exec runs the actions; it returns the Exit action when there is one.
func (r *Runtime) exec(acts []Action) (Exit, bool) {
	for _, a := range acts {
		switch a := a.(type) {
		case Start:
			r.start(a)
		case Route:
			r.route(a.ID)
		case Hold:
			if r.o.Proxy != nil {
				r.o.Proxy.Hold()
			}
		case Watch:
			r.watch(a)
		case Stop:
			r.stop(a)
		case Gone:
			if l := r.get(a.ID); l != nil && l.inst != nil && l.inst.Backend != nil {
				if a.Last {
					l.inst.Backend.GoneLast()
				} else {
					l.inst.Backend.Gone()
				}
			}
		case Cut:
			r.countCut(cmp.Or(a.Cause.Why, a.Cause.What)) // an engine that ended by itself has no Why
			if r.o.Proxy != nil {
				r.o.Proxy.Close(a.Cause)
			}
		case Refuse:
			if r.o.Proxy != nil {
				r.o.Proxy.Refuse()
			}
			go r.o.Launcher.Notify(NoteStopping{}) // it may wait on a reply from this loop
		case Reply:
			if a.Job != nil && a.Job.Reply != nil {
				select {
				case a.Job.Reply <- a.Err:
				default:
				}
			}
		case Switched:
			r.o.Launcher.Notify(NoteSwitched{Switched: a, To: r.inst(a.To)})
		case Adopt:
			r.o.Launcher.Notify(NoteAdopted{Job: a.Job})
		case Log:
			r.o.Log.Log(context.Background(), slog.Level(a.Level), a.Msg, a.Attrs...)
		case Withdrawn:
			a.Dropped <- a.Withdrawal // buffered: Withdraw made it
		case Exit:
			return a, true
		}
	}
	return Exit{}, false
}

func (r *Runtime) get(id EngineID) *live {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.engines[id]
}

func (r *Runtime) inst(e *Engine) *Instance {
	if e == nil {
		return nil
	}
	if l := r.get(e.ID); l != nil {
		return l.inst
	}
	return nil
}

// countCut adds up the requests in flight on every engine as they are
// stopped under them (the shutdown timeout passed, or a second signal).
func (r *Runtime) countCut(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cutWhy = why
	for _, l := range r.engines {
		if l.inst != nil && l.inst.Backend != nil {
			r.cut += l.inst.Backend.InFlight()
		}
	}
}

// Cut is how many requests were in flight when speclaunch stopped the
// engines under them, 0 for a clean stop, and why it did.
func (r *Runtime) Cut() (int, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cut, r.cutWhy
}

// start launches an engine off the loop; Ready, then Exited, come back.
func (r *Runtime) start(a Start) {
	ctx, cancel := context.WithCancel(context.Background())
	l := &live{plan: a.Engine.Plan, limits: a.Engine.Limits, ctx: ctx, cancel: cancel}
	r.mu.Lock()
	r.engines[a.Engine.ID] = l
	r.mu.Unlock()
	id := a.Engine.ID
	go func() {
		in, err := r.o.Launcher.Launch(context.Background(), a.Engine.Plan, id, a.Kind, ctx)
		if err == nil && ctx.Err() != nil {
			in.Proc.Stop(l.limits.StopTimeout)
			err = context.Canceled
		}
		if err != nil {
			if ctx.Err() != nil && in != nil && in.Proc != nil {
				// Stopped while it started (a signal, a switch given
				// up): its code is said as a serving engine's stop's is.
				<-in.Proc.Done()
				r.o.Log.Info("engine stopped", "pid", in.Proc.PID(), "exit_code", in.Proc.ExitCode(), "why", "it was starting")
			}
			r.events <- Ready{ID: id, Err: err}
			r.events <- Exited{ID: id, Code: -1}
			return
		}
		in.ID = id
		r.mu.Lock()
		l.inst = in
		r.mu.Unlock()
		if err := r.o.Launcher.BeforeTraffic(ctx, in); err != nil && ctx.Err() == nil {
			r.o.Log.Warn("the probe before traffic did not finish; the engine serves all the same (what is missing is probed under load)", "pid", in.Proc.PID(), "err", err)
		}
		r.events <- Ready{ID: id}
		<-in.Proc.Done()
		code := in.Proc.ExitCode()
		r.mu.Lock()
		why := l.why
		r.mu.Unlock()
		elsewhere := ""
		switch why {
		case "":
		case WhyStopping, WhyFinished:
			r.mu.Lock()
			elsewhere = l.sent.elsewhere(code, in.Proc.Sent)
			r.mu.Unlock()
			if elsewhere != "" {
				// Its death, not the stop, ended it (the cut streams let
				// the drain end first): its code is the launcher's.
				r.o.Log.Error("the engine exited while it finished its requests, and not by speclaunch's stop (a kill from outside, or the kernel's OOM killer: see dmesg; or a crash)", "pid", in.Proc.PID(), "exit_code", code, "why", elsewhere)
				break
			}
			r.o.Log.Info("engine stopped", "pid", in.Proc.PID(), "exit_code", code)
		case WhyHung:
			// The only engine, killed for not answering: not an "old" one.
			r.o.Log.Info("engine stopped", "pid", in.Proc.PID(), "exit_code", code, "why", "it stopped answering")
		default:
			r.sayOldStopped(l, in.Proc.PID(), code, in.Proc.Sent)
		}
		r.o.Launcher.Notify(NoteExited{In: in, Code: code})
		r.events <- Exited{ID: id, Code: code, Elsewhere: elsewhere}
	}()
}

func (r *Runtime) route(id EngineID) {
	l := r.get(id)
	if l == nil || l.inst == nil {
		return
	}
	r.mu.Lock()
	r.serving = id
	check := !l.checked
	l.checked = true
	if l.unwatch != nil {
		l.unwatch() // a drain switch abandoned: it serves again
		l.unwatch = nil
	}
	r.mu.Unlock()
	if r.o.Proxy != nil && l.inst.Backend != nil {
		r.o.Proxy.Route(l.inst.Backend)
	}
	r.o.Launcher.Notify(NoteServing{In: l.inst})
	if d := l.limits.HangTimeout; d > 0 && check {
		go r.liveness(l, d)
	}
}

// stale reports a Drained that no longer holds as the loop reads it:
// requests were routed to the engine since it was sent (a drain switch
// abandoned at SIGTERM gives the held requests to its draining engine,
// whose drain may have ended a moment before). The machine would stop the
// engine under them; instead the wait is made again, and Drained comes
// once it holds.
func (r *Runtime) stale(ev Event) bool {
	d, ok := ev.(Drained)
	if !ok {
		return false
	}
	l := r.get(d.ID)
	if l == nil || l.inst == nil || l.inst.Backend == nil || l.inst.Backend.InFlight() == 0 {
		return false
	}
	b := l.inst.Backend
	go func() {
		if b.Drain(l.ctx) == 0 {
			r.events <- Drained{ID: d.ID}
		}
	}()
	return true
}

// watch sends Drained once the engine has no request in flight; a wait
// that lasts is said with the requests it waits for and its bound.
func (r *Runtime) watch(a Watch) {
	id := a.ID
	l := r.get(id)
	if l == nil || l.inst == nil || l.inst.Backend == nil {
		r.events <- Drained{ID: id}
		return
	}
	ctx, cancel := context.WithCancel(l.ctx)
	r.mu.Lock()
	l.drain = time.Now()
	l.unwatch = cancel
	r.mu.Unlock()
	b := l.inst.Backend
	end := waitlog.Start(r.o.Log, r.o.Clock, waitlog.Wait{For: func() string {
		return fmt.Sprintf("%s to finish on engine %d%s", requests(b.InFlight()), id, a.Before)
	}, Bound: a.Bound, Then: a.Then})
	go func() {
		n := b.Drain(ctx)
		cancel()
		end()
		if n == 0 {
			r.events <- Drained{ID: id}
		}
	}()
}

// requests is "1 request", "3 requests".
func requests(n int) string {
	if n == 1 {
		return "1 request"
	}
	return fmt.Sprintf("%d requests", n)
}

// stop signals the engine's group; Exited follows from its start goroutine.
func (r *Runtime) stop(a Stop) {
	l := r.get(a.ID)
	if l == nil {
		return
	}
	r.mu.Lock()
	if r.serving == a.ID {
		r.serving = 0
	}
	in := l.inst
	l.why = a.Why
	r.mu.Unlock()
	l.cancel() // ends a start still under way, a drain watch, the liveness check
	if in == nil {
		return // still starting: the cancel stops it
	}
	if in.Backend != nil {
		in.Backend.Closing()
	}
	select {
	case <-in.Proc.Done():
		r.mu.Lock()
		l.sent.exitedFirst = true
		r.mu.Unlock()
	default:
	}
	timeout := l.limits.StopTimeout
	if a.Why == WhyHung && in.Backend != nil {
		// Before the kill: a stream it cuts says the liveness check, as
		// the runtime's Cut does where no restart follows; with one, no
		// Cut comes, and the stream read that the engine failed.
		in.Backend.StopsWith(hungWhy)
	}
	if a.Why == DrainTimedOut && in.Backend != nil {
		r.mu.Lock()
		since := time.Since(l.drain)
		r.mu.Unlock()
		r.o.Log.Warn("drain ended with requests still in flight; stopping the old engine", "in_flight", in.Backend.InFlight(), "after", since.Round(time.Millisecond).String(), "pid", in.Proc.PID())
		// Before the signal: a stream it cuts ends saying why, not that
		// the engine failed (those not begun go to the next engine: Gone).
		in.Backend.StopsWith("it was replaced, and its requests outlasted server.drain_timeout")
	}
	r.o.Log.Info("stopping engine", "pid", in.Proc.PID(), "why", a.Why)
	end := func() {}
	if !a.Kill {
		sig := "SIGTERM"
		if a.Sig != nil {
			sig = sigName(a.Sig)
		}
		end = waitlog.Start(r.o.Log, r.o.Clock, waitlog.For(fmt.Sprintf("engine %d (pid %d) to exit after %s", a.ID, in.Proc.PID(), sig), timeout, ", then SIGKILL"))
	}
	go func() {
		defer end()
		switch {
		case a.Kill:
			in.Proc.Signal(syscall.SIGKILL)
		case a.Sig != nil:
			in.Proc.Signal(a.Sig)
			t := time.NewTimer(timeout)
			defer t.Stop()
			select {
			case <-in.Proc.Done():
			case <-t.C:
				r.o.Log.Warn("engine did not stop in time; killing it", "pid", in.Proc.PID(), "after", timeout.String())
				in.Proc.Stop(0)
			}
		default:
			in.Proc.Stop(timeout)
		}
	}()
}

// sent is what speclaunch's stop found of an engine, so that its exit
// can be told from an end that came from elsewhere (a kill from outside,
// the kernel's OOM killer) as its drain ended: the streams the death cut
// let the drain end, and the stop came after it. The signals the stop
// sent, Stop's SIGKILL included, are the process's record
// (supervise.Process.Sent).
type sent struct {
	exitedFirst bool // it had exited before speclaunch stopped it
}

// elsewhere says what ended an engine other than speclaunch's stop, from
// its exit code (128+N for signal N); "" when the stop was speclaunch's:
// a signal it sent the engine (sentSig).
func (s sent) elsewhere(code int, sentSig func(syscall.Signal) bool) string {
	if s.exitedFirst {
		return fmt.Sprintf("it exited with code %d before speclaunch stopped it", code)
	}
	if code <= 128 || code > 128+64 {
		return ""
	}
	sig := syscall.Signal(code - 128)
	if sentSig(sig) {
		return ""
	}
	return fmt.Sprintf("signal %d (%s), which speclaunch did not send", int(sig), sig)
}

// sayOldStopped logs an old engine's end after speclaunch told it to
// stop: "old engine stopped", or, when something else ended it (its exit
// code says a signal speclaunch did not send, or it had exited before the
// stop), at error as the machine says a death during a drain.
func (r *Runtime) sayOldStopped(l *live, pid, code int, sentSig func(syscall.Signal) bool) {
	r.mu.Lock()
	st := l.sent
	r.mu.Unlock()
	why := st.elsewhere(code, sentSig)
	if why == "" {
		r.o.Log.Info("old engine stopped", "pid", pid, "exit_code", code)
		return
	}
	level := slog.LevelError
	if code == 0 {
		level = slog.LevelInfo
	}
	r.o.Log.Log(context.Background(), level, "the old engine exited while it drained, and not by speclaunch's stop (a kill from outside, or the kernel's OOM killer: see dmesg; or the engine's own exit); any stream it was answering ended with an error event",
		"pid", pid, "exit_code", code, "why", why)
}

// liveness asks the engine's /health with a short timeout; an engine that
// has not answered at all for d is reported hung. Any HTTP answer counts
// (llama-server says 503 while busy loading, which is not a hang).
func (r *Runtime) liveness(l *live, d time.Duration) {
	every := min(max(d/10, 250*time.Millisecond), 2*time.Second)
	client := &http.Client{Timeout: every, Transport: &http.Transport{DisableKeepAlives: true}}
	url := strings.TrimRight(l.inst.BaseURL, "/") + "/health"
	last := time.Now()
	local := false // the last check failed on this side (netfail.Local)
	t := time.NewTicker(every)
	defer t.Stop()
	// silent: the wait for an answer once one was missed, said should it
	// last (waitlog); nil while the engine answers.
	var silent func()
	defer func() {
		if silent != nil {
			silent()
		}
	}()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-l.inst.Proc.Done():
			return
		case <-t.C:
		}
		req, _ := http.NewRequestWithContext(l.ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			last, local = time.Now(), false
			if r.o.Proxy != nil && l.inst.Backend != nil {
				// A refused dial's mark on it lifts: it answers.
				r.o.Proxy.Answered(l.inst.Backend)
			}
			if silent != nil {
				silent()
				silent = nil
			}
			continue
		}
		if netfail.Of(err) == netfail.Local {
			// This process could not ask (out of descriptors under a
			// connection flood): no sign of the engine's health either
			// way, so the hang clock pauses for this tick rather than
			// restarting (an engine that also stopped answering is still
			// killed once the checks get through).
			if !local {
				r.o.Log.Warn("cannot check the engine's health: this process is out of resources; not counted against the engine", "engine_n", l.inst.ID, "err", err)
			}
			local = true
			if last = last.Add(every); last.After(time.Now()) {
				last = time.Now()
			}
			continue
		}
		local = false
		if silent == nil && l.ctx.Err() == nil {
			silent = waitlog.Start(r.o.Log, r.o.Clock, waitlog.For(fmt.Sprintf("engine %d (pid %d) to answer /health again", l.inst.ID, l.inst.Proc.PID()),
				max(d-time.Since(last), 0), ", then it is killed as hung"))
		}
		if time.Since(last) >= d && l.ctx.Err() == nil {
			r.events <- Hung{ID: l.inst.ID}
			return
		}
	}
}

// Transport wraps base so that the launcher's own requests to an engine
// (verification, warm-up, probes, scrapes) are counted in flight on it
// like a client's: the engine is not stopped under one. A request to an
// engine being stopped fails at once with proxy.ErrEngineReplaced (ask
// Current for the engine that serves now).
func (r *Runtime) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &counting{r: r, base: base}
}

type counting struct {
	r    *Runtime
	base http.RoundTripper
}

func (c *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	b := c.r.backendFor(req.URL.Host)
	if b == nil {
		return c.base.RoundTrip(req)
	}
	release, err := b.Track()
	if err != nil {
		return nil, err
	}
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		release()
		return nil, err
	}
	resp.Body = &releasing{ReadCloser: resp.Body, release: release}
	return resp, nil
}

func (r *Runtime) backendFor(host string) *proxy.Backend {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.engines {
		if l.inst != nil && l.inst.Backend != nil && l.inst.Backend.URL.Host == host {
			return l.inst.Backend
		}
	}
	return nil
}

// releasing ends a tracked request when its body is read or closed.
type releasing struct {
	io.ReadCloser
	release func()
}

func (b *releasing) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.release()
	}
	return n, err
}

func (b *releasing) Close() error {
	b.release()
	return b.ReadCloser.Close()
}
