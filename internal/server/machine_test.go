package server

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/supervise"
)

// fake is a machine driven by events on a fake clock.
type fake struct {
	t    *testing.T
	m    Machine
	now  time.Time
	last []Action // the last step's actions, logs included
}

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func planOf(args ...string) *plan.Plan {
	return &plan.Plan{Launch: engine.Launch{Argv: append([]string{"engine"}, args...)}}
}

var limits = Limits{Restart: false, DrainTimeout: 2 * time.Minute, ShutdownTimeout: 30 * time.Second}

// serving is a machine whose first engine (1) serves.
func serving(t *testing.T, l Limits) *fake {
	f := &fake{t: t, m: NewMachine(planOf("--w", "4"), l), now: t0}
	f.want(Begin{}, "Start(1 start)")
	f.want(Ready{ID: 1}, "Route(1)")
	if f.m.Phase != Serving {
		t.Fatalf("phase %s after the first start, want serving", f.m.Phase)
	}
	return f
}

// step applies ev after d and returns the actions, summarised.
func (f *fake) after(d time.Duration, ev Event) string {
	f.t.Helper()
	f.now = f.now.Add(d)
	var acts []Action
	f.m, acts = Step(f.m, ev, f.now)
	f.last = acts
	return summary(acts)
}

// logged fails unless the last step logged a message holding msg at level.
func (f *fake) logged(level int, msg string) {
	f.t.Helper()
	var got []string
	for _, a := range f.last {
		if l, ok := a.(Log); ok {
			if l.Level == level && strings.Contains(l.Msg, msg) {
				return
			}
			got = append(got, fmt.Sprintf("%d %q", l.Level, l.Msg))
		}
	}
	f.t.Errorf("no log at level %d holding %q; logged: %s", level, msg, strings.Join(got, ", "))
}

func (f *fake) want(ev Event, want string) {
	f.t.Helper()
	f.wantAfter(0, ev, want)
}

func (f *fake) wantAfter(d time.Duration, ev Event, want string) {
	f.t.Helper()
	if got := f.after(d, ev); got != want {
		f.t.Fatalf("after %T%+v: actions\n  %s\nwant\n  %s", ev, ev, got, want)
	}
}

// summary writes actions as short words, logs left out.
func summary(acts []Action) string {
	var out []string
	for _, a := range acts {
		switch a := a.(type) {
		case Start:
			out = append(out, fmt.Sprintf("Start(%d %s)", a.Engine.ID, a.Kind))
		case Route:
			out = append(out, fmt.Sprintf("Route(%d)", a.ID))
		case Hold:
			out = append(out, "Hold")
		case Watch:
			out = append(out, fmt.Sprintf("Watch(%d)", a.ID))
		case Stop:
			s := fmt.Sprintf("Stop(%d", a.ID)
			if a.Kill {
				s += " kill"
			}
			if a.Sig != nil {
				s += " " + sigName(a.Sig)
			}
			out = append(out, s+")")
		case Gone:
			s := fmt.Sprintf("Gone(%d", a.ID)
			if a.Last {
				s += " last"
			}
			out = append(out, s+")")
		case Refuse:
			out = append(out, "Refuse")
		case Reply:
			out = append(out, fmt.Sprintf("Reply(%v)", a.Err))
		case Cut:
			out = append(out, "Cut")
		case Switched:
			sw := fmt.Sprintf("ok=%v", a.OK)
			if a.From != nil {
				sw += fmt.Sprintf(" from=%d", a.From.ID)
			}
			if a.Drain > 0 {
				sw += fmt.Sprintf(" drain=%s", a.Drain)
			}
			out = append(out, "Switched("+sw+")")
		case Adopt:
			out = append(out, "Adopt")
		case Exit:
			out = append(out, fmt.Sprintf("Exit(%d)", a.Code))
		case Withdrawn:
			s := "Withdrawn(none"
			if a.Job != nil {
				s = "Withdrawn(" + a.Job.Kind.String()
			}
			if a.UnderWay != nil {
				s += " under " + a.UnderWay.Kind.String()
			}
			out = append(out, s+")")
		}
	}
	return strings.Join(out, " ")
}

func job(k Kind, mode key.Switch, p *plan.Plan) *Job {
	return &Job{Kind: k, Mode: mode, Plan: p, Limits: limits, Reason: k.String()}
}

func TestOverlapSwitch(t *testing.T) {
	f := serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "3"))}, "Start(2 reload)")
	if f.m.Phase != Switching || f.m.Serving.ID != 1 || f.m.held {
		t.Fatalf("during an overlap start the old engine serves: %+v", f.m)
	}
	// Ready: traffic moves at once; the old engine drains, then stops.
	f.wantAfter(time.Second, Ready{ID: 2}, "Route(2) Watch(1) Switched(ok=true from=1) Reply(<nil>)")
	f.want(Drained{ID: 1}, "Stop(1)")
	f.want(Exited{ID: 1, Code: 0}, "")
	if f.m.Phase != Serving || f.m.Serving.ID != 2 || f.m.Draining != nil {
		t.Fatalf("after the switch: %+v", f.m)
	}
}

// A switch asked for while the old engine still drains waits for it: at
// most one engine draining.
func TestSwitchDuringDrainWaits(t *testing.T) {
	f := serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "3"))}, "Start(2 reload)")
	f.want(Ready{ID: 2}, "Route(2) Watch(1) Switched(ok=true from=1) Reply(<nil>)")
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "5"))}, "")
	later := job(KindAdapt, key.SwitchOverlap, planOf("--w", "6"))
	f.want(Submit{Job: later}, "Reply(superseded by a later switch)")
	f.want(Drained{ID: 1}, "Stop(1)")
	f.want(Exited{ID: 1}, "Start(3 adapt)")
	f.want(Ready{ID: 3}, "Route(3) Watch(2) Switched(ok=true from=2) Reply(<nil>)")
}

// A reload the files no longer make (a later reading was rejected) is
// dropped while it waits for the switch under way, and only then: the
// switch under way goes on, and a follow or adaptive switch that waits
// stays. Before, nothing took a waiting edit back: with block_size 3
// switching, block_size 2 waiting and then "x" rejected, width 2 served
// 13 s later and its reload counted applied while last_reload read
// rejected.
func TestWithdrawDropsOnlyAWaitingReload(t *testing.T) {
	for _, tc := range []struct {
		name    string
		running bool // a reload's switch is under way
		waiting Kind // the kind of the job that waits; KindStart: none
		want    string
	}{
		{"a reload waits", true, KindReload, "Reply(dropped: the files no longer read that way) Withdrawn(reload under reload)"},
		{"a follow switch waits", true, KindFollow, "Withdrawn(none under reload)"},
		{"none waits, a reload is under way", true, KindStart, "Withdrawn(none under reload)"},
		{"nothing runs", false, KindStart, "Withdrawn(none)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := serving(t, limits)
			if tc.running {
				f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "3"))}, "Start(2 reload)")
			}
			if tc.waiting != KindStart {
				f.want(Submit{Job: job(tc.waiting, key.SwitchOverlap, planOf("--w", "2"))}, "")
			}
			dropped := make(chan Withdrawal, 1)
			f.want(Withdraw{Kind: KindReload, Dropped: dropped}, tc.want)
			if tc.running {
				f.want(Ready{ID: 2}, "Route(2) Watch(1) Switched(ok=true from=1) Reply(<nil>)")
				f.want(Drained{ID: 1}, "Stop(1)")
				// A follow switch that waited starts now; a dropped
				// reload does not.
				next := ""
				if tc.waiting == KindFollow {
					next = "Start(3 follow)"
				}
				f.want(Exited{ID: 1}, next)
			}
		})
	}
}

func TestOverlapStartFailsOldKeepsServing(t *testing.T) {
	f := serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--bad"))}, "Start(2 reload)")
	f.want(Ready{ID: 2, Err: errors.New("no binary")}, "Switched(ok=false from=1) Reply(no binary)")
	f.want(Exited{ID: 2, Code: -1}, "")
	if f.m.Phase != Serving || f.m.Serving.ID != 1 {
		t.Fatalf("the old engine must keep serving: %+v", f.m)
	}
}

func TestDrainSwitch(t *testing.T) {
	f := serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchDrain, planOf("--w", "3"))}, "Hold Watch(1)")
	// The status names the width left and the drain's time, though the
	// old engine is gone by the time the new one serves.
	f.wantAfter(3*time.Second, Drained{ID: 1}, "Stop(1)")
	f.wantAfter(time.Second, Exited{ID: 1}, "Start(2 reload)")
	f.wantAfter(2*time.Second, Ready{ID: 2}, "Route(2) Switched(ok=true from=1 drain=3s) Reply(<nil>)")
	if f.m.held || f.m.Phase != Serving {
		t.Fatalf("after a drain switch: %+v", f.m)
	}
}

func TestDrainTimeoutStopsTheOldEngine(t *testing.T) {
	f := serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchDrain, planOf("--w", "3"))}, "Hold Watch(1)")
	if d := f.m.Deadline(); !d.Equal(f.now.Add(limits.DrainTimeout)) {
		t.Fatalf("deadline %v, want the drain timeout", d)
	}
	// Gone first: the requests it had not answered (queued in the
	// engine) are sent again to the new engine once it serves.
	f.wantAfter(limits.DrainTimeout, Tick{}, "Gone(1) Stop(1)")
	if st := f.m.stopping; len(st) != 1 || st[0] != 1 {
		t.Fatalf("stopping %v", st)
	}
	f.want(Exited{ID: 1, Code: 0}, "Start(2 reload)")
}

// An overlap switch's old engine stopped at its drain timeout: Gone
// first, so that its requests without a response byte go to the serving
// engine rather than failing once it is stopped.
func TestOverlapDrainTimeoutIsGone(t *testing.T) {
	f := serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "3"))}, "Start(2 reload)")
	f.want(Ready{ID: 2}, "Route(2) Watch(1) Switched(ok=true from=1) Reply(<nil>)")
	f.wantAfter(limits.DrainTimeout, Tick{}, "Gone(1) Stop(1)")
	f.want(Exited{ID: 1, Code: 0}, "")
}

// An old engine that dies while it drains (a crash, a kill from outside)
// is gone at once, and said: its requests without a response byte go to
// the serving engine.
func TestDrainingEngineCrashIsGone(t *testing.T) {
	f := serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "3"))}, "Start(2 reload)")
	f.want(Ready{ID: 2}, "Route(2) Watch(1) Switched(ok=true from=1) Reply(<nil>)")
	f.want(Exited{ID: 1, Code: 137}, "Gone(1)")
	f.logged(lvError, "old engine exited while it drained")
	if f.m.Phase != Serving || f.m.Serving.ID != 2 || f.m.Draining != nil {
		t.Fatalf("after the old engine's crash: %+v", f.m)
	}
	// In drain mode the new engine starts, and takes the requests re-sent.
	f = serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchDrain, planOf("--w", "3"))}, "Hold Watch(1)")
	f.want(Exited{ID: 1, Code: 137}, "Gone(1) Start(2 reload)")
	f.logged(lvError, "old engine exited while it drained")
	// An engine stopped as asked is not gone twice, nor said as a crash.
	f = serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchDrain, planOf("--w", "3"))}, "Hold Watch(1)")
	f.want(Drained{ID: 1}, "Stop(1)")
	f.want(Exited{ID: 1, Code: 0}, "Start(2 reload)")
	for _, a := range f.last {
		if l, ok := a.(Log); ok {
			t.Errorf("an engine stopped as asked logged %q", l.Msg)
		}
	}
}

// In drain mode a new engine that cannot start gives way to the previous
// settings: something serves again.
func TestDrainStartFailsFallsBack(t *testing.T) {
	f := serving(t, limits)
	prev := f.m.Plan
	f.want(Submit{Job: job(KindReload, key.SwitchDrain, planOf("--bad"))}, "Hold Watch(1)")
	f.want(Drained{ID: 1}, "Stop(1)")
	f.want(Exited{ID: 1}, "Start(2 reload)")
	f.want(Ready{ID: 2, Err: errors.New("bad flag")}, "Start(3 reload)")
	f.want(Ready{ID: 3}, "Route(3) Switched(ok=false from=1) Reply(bad flag)")
	if f.m.Plan != prev {
		t.Fatal("the previous plan must be in force after the fallback")
	}
}

// SIGTERM with requests in flight: readiness down and new requests
// refused at once; the engine stops only once its requests finished.
func TestSIGTERMWaitsForRequests(t *testing.T) {
	f := serving(t, limits)
	f.want(Signal{Sig: syscall.SIGTERM}, "Refuse Watch(1)")
	if f.m.Phase != Stopping {
		t.Fatalf("phase %s", f.m.Phase)
	}
	f.wantAfter(3*time.Second, Drained{ID: 1}, "Stop(1 SIGTERM)")
	f.want(Exited{ID: 1, Code: 0}, "Exit(0)")
}

func TestShutdownTimeoutCutsRequests(t *testing.T) {
	f := serving(t, limits)
	f.want(Signal{Sig: syscall.SIGTERM}, "Refuse Watch(1)")
	f.wantAfter(limits.ShutdownTimeout-time.Millisecond, Tick{}, "")
	f.wantAfter(time.Millisecond, Tick{}, "Cut Stop(1 SIGTERM)")
	// The engine's code after the launcher's own stop is not the
	// launcher's: serve turns the cut into exit 4 (cutExit); before, a
	// SIGKILLed engine's 137 hid it.
	f.want(Exited{ID: 1, Code: 143}, "Exit(0)")
}

// A Cut carries what the clients whose answers it ends are told: an
// engine that exited with no engine to follow it is not speclaunch's
// stop. Before, the proxy told every one "the shutdown timeout passed, or
// a second signal came", also after a kill -9 with no restart policy.
func TestCutSaysWhatEndedTheRequests(t *testing.T) {
	stopped := "speclaunch stopped the engine"
	backoff := proxy.Cause{What: stopped, Why: "a SIGTERM came while the engine waited to start again"}
	failedStart := errors.New(`exec: "/opt/llama/bin/llama-server": permission denied`)
	for _, tc := range []struct {
		name    string
		restart bool // --restart on-failure
		events  []Event
		want    proxy.Cause
	}{
		{"the engine exited", false, []Event{Exited{ID: 1, Code: 137}}, proxy.Cause{What: "the engine exited with code 137"}},
		{"a clean exit", false, []Event{Exited{ID: 1, Code: 0}}, proxy.Cause{What: "the engine exited with code 0"}},
		{"killed as hung", false, []Event{Hung{ID: 1}, Exited{ID: 1, Code: 137}}, proxy.Cause{What: stopped, Why: "it stopped answering its liveness check"}},
		{"a second signal", false, []Event{Signal{Sig: os.Interrupt}, Signal{Sig: os.Interrupt}}, proxy.Cause{What: stopped, Why: "a second signal came"}},
		{"the shutdown timeout", false, []Event{Signal{Sig: syscall.SIGTERM}, Tick{}}, proxy.Cause{What: stopped, Why: "the shutdown timeout passed"}},
		// The clients read no start error: before, theirs ended
		// "(SIGTERM came while the engine waited to start again after
		// failing to start (exec: ...))".
		{"a signal in the back-off after a crash", true, []Event{Exited{ID: 1, Code: 137}, Signal{Sig: syscall.SIGTERM}}, backoff},
		{"a signal in the back-off after a failed start", true,
			[]Event{Exited{ID: 1, Code: 137}, Tick{}, Ready{ID: 2, Err: failedStart}, Signal{Sig: syscall.SIGTERM}}, backoff},
		// The back-off over, the restarted engine loading: the shell's
		// close at exit told the held requests "the engine exited".
		{"a signal while the restarted engine starts", true,
			[]Event{Exited{ID: 1, Code: 137}, Tick{}, Signal{Sig: syscall.SIGTERM}}, proxy.Cause{What: stopped, Why: "a SIGTERM came while the engine was starting"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := limits
			l.Restart = tc.restart
			f := serving(t, l)
			var cuts []proxy.Cause
			for _, ev := range tc.events {
				f.after(limits.ShutdownTimeout, ev)
				for _, a := range f.last {
					if c, ok := a.(Cut); ok {
						cuts = append(cuts, c.Cause)
					}
				}
			}
			if len(cuts) != 1 || cuts[0] != tc.want {
				t.Errorf("cuts %+v, want one: %+v", cuts, tc.want)
			}
		})
	}
}

func TestSecondSignalStopsAtOnceThirdKills(t *testing.T) {
	f := serving(t, limits)
	f.want(Signal{Sig: os.Interrupt}, "Refuse Watch(1)")
	f.want(Signal{Sig: os.Interrupt}, "Cut Stop(1 SIGINT)")
	f.want(Signal{Sig: os.Interrupt}, "Stop(1 kill SIGINT)")
	f.want(Exited{ID: 1, Code: 137}, "Exit(0)") // killed by the launcher: serve's cutExit makes it 4
}

// SIGTERM during an overlap switch: the serving engine takes the requests
// to their end; the new one is stopped and its switch answered.
func TestSIGTERMDuringOverlapSwitch(t *testing.T) {
	f := serving(t, limits)
	f.want(Submit{Job: job(KindAdapt, key.SwitchOverlap, planOf("--w", "3"))}, "Start(2 adapt)")
	f.wantAfter(time.Millisecond, Signal{Sig: syscall.SIGTERM}, "Refuse Stop(2 SIGTERM) Reply(speclaunch is stopping) Watch(1)")
	f.want(Ready{ID: 2}, "") // the start finished anyway: ignored, it is being stopped
	f.want(Exited{ID: 2, Code: 0}, "")
	f.want(Drained{ID: 1}, "Stop(1 SIGTERM)")
	f.want(Exited{ID: 1}, "Exit(0)")
}

// SIGTERM in the middle of a drain switch, nothing serving: the engine
// starting is stopped at once (a model load takes minutes); held requests
// get 503.
func TestSIGTERMDuringDrainSwitch(t *testing.T) {
	f := serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchDrain, planOf("--w", "3"))}, "Hold Watch(1)")
	f.want(Drained{ID: 1}, "Stop(1)")
	f.want(Exited{ID: 1}, "Start(2 reload)")
	f.want(Signal{Sig: syscall.SIGTERM}, "Refuse Cut Stop(2 SIGTERM)")
	f.want(Ready{ID: 2, Err: errors.New("interrupted")}, "")
	f.want(Exited{ID: 2, Code: -1}, "Reply(speclaunch is stopping) Exit(143)")
}

// SIGTERM while a drain switch's old engine still drains (new requests
// held, the new engine not started): the switch is abandoned and the old
// engine, alive and with the settings in force, serves again: the held
// requests go to it, within the shutdown timeout.
func TestSIGTERMDuringDrainPhase(t *testing.T) {
	f := serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchDrain, planOf("--w", "3"))}, "Hold Watch(1)")
	f.wantAfter(time.Second, Signal{Sig: syscall.SIGTERM}, "Refuse Route(1) Reply(speclaunch is stopping) Watch(1)")
	f.logged(lvInfo, "the switch under way is abandoned")
	if f.m.Phase != Stopping || f.m.Serving == nil || f.m.Serving.ID != 1 || f.m.Draining != nil || f.m.held || f.m.Job != nil {
		t.Fatalf("after SIGTERM in the drain phase: %+v", f.m)
	}
	if d := f.m.Deadline(); !d.Equal(f.now.Add(limits.ShutdownTimeout)) {
		t.Fatalf("deadline %v, want the shutdown timeout's, not the drain's", d)
	}
	f.want(Drained{ID: 1}, "Stop(1 SIGTERM)")
	f.want(Exited{ID: 1, Code: 0}, "Exit(0)")
}

// SIGTERM after the drain timeout already stopped the old engine: nothing
// can serve the held requests (a new engine is not started while
// stopping); the log says they get 503.
func TestSIGTERMWhileDrainSwitchStopsTheOld(t *testing.T) {
	f := serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchDrain, planOf("--w", "3"))}, "Hold Watch(1)")
	f.wantAfter(limits.DrainTimeout, Tick{}, "Gone(1) Stop(1)")
	f.want(Signal{Sig: syscall.SIGTERM}, "Refuse Cut Reply(speclaunch is stopping)")
	f.logged(lvInfo, "held requests get 503")
	// The held requests are told the signal, not "the engine exited" (the
	// shell's close at exit), and the launcher exits 143, as when an
	// engine loading with nothing serving is stopped.
	for _, a := range f.last {
		if c, ok := a.(Cut); ok && c.Cause != stoppedBy("a SIGTERM came while the engine was being switched") {
			t.Errorf("cut %+v", c.Cause)
		}
	}
	f.want(Exited{ID: 1, Code: 0}, "Exit(143)")
}

// A signal during the first load stops the engine at once.
func TestSignalDuringFirstLoad(t *testing.T) {
	f := &fake{t: t, m: NewMachine(planOf(), limits), now: t0}
	f.want(Begin{}, "Start(1 start)")
	f.want(Signal{Sig: os.Interrupt}, "Refuse Cut Stop(1 SIGINT)")
	f.want(Exited{ID: 1, Code: -1}, "Reply(speclaunch is stopping) Exit(130)")
}

func TestCrashRestartsOnFailure(t *testing.T) {
	l := limits
	l.Restart = true
	f := serving(t, l)
	f.wantAfter(5*time.Second, Exited{ID: 1, Code: 1}, "Hold Gone(1)")
	if f.m.Phase != Starting || f.m.Deadline().IsZero() {
		t.Fatalf("a crash with restart on-failure waits its backoff: %+v", f.m)
	}
	f.wantAfter(time.Second, Tick{}, "Start(2 restart)")
	m, acts := Step(f.m, Ready{ID: 2}, f.now)
	f.m = m
	for _, a := range acts {
		// Issue 33: a restart was recorded as mode overlap; nothing
		// served beside it.
		if sw, ok := a.(Switched); ok && sw.Job.Mode != key.SwitchAlone {
			t.Errorf("a restart recorded with mode %s, want %s", sw.Job.Mode, key.SwitchAlone)
		}
	}
	if got := summary(acts); got != "Route(2) Switched(ok=true) Reply(<nil>)" {
		t.Errorf("Ready(2): %s", got)
	}
}

func TestCrashWithoutRestartExits(t *testing.T) {
	f := serving(t, limits)
	f.want(Exited{ID: 1, Code: 3}, "Hold Gone(1 last) Refuse Cut Exit(3)")
}

// An engine that dies or hangs with no engine to follow it (no restart
// policy, or a clean exit, and none starting) is marked gone as the last
// one: the proxy's log says its unanswered requests get 503 as speclaunch
// stops, where it said they were sent to the next engine. One that a
// restart or a starting engine follows is not the last.
func TestGoneSaysWhetherAnEngineFollows(t *testing.T) {
	f := serving(t, limits)
	f.want(Hung{ID: 1}, "Gone(1 last) Stop(1 kill)")
	f.want(Exited{ID: 1, Code: 137}, "Hold Gone(1 last) Refuse Cut Exit(137)")

	restart := limits
	restart.Restart = true
	f = serving(t, restart)
	f.want(Exited{ID: 1, Code: 0}, "Hold Gone(1 last) Refuse Cut Exit(0)") // a clean exit is not restarted
	f = serving(t, restart)
	f.want(Hung{ID: 1}, "Gone(1) Stop(1 kill)")

	f = serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "3"))}, "Start(2 reload)")
	f.want(Exited{ID: 1, Code: 1}, "Hold Gone(1)")
}

// A hung engine is killed and replaced; requests without a response byte
// go to the replacement (Gone).
func TestHungEngineIsReplaced(t *testing.T) {
	l := limits
	l.Restart = true
	f := serving(t, l)
	f.want(Hung{ID: 1}, "Gone(1) Stop(1 kill)")
	f.want(Exited{ID: 1, Code: 137}, "Hold Gone(1)")
	f.wantAfter(time.Second, Tick{}, "Start(2 restart)")
}

// The serving engine exits while a new one starts: requests wait for the
// new one, which then takes them.
func TestExitDuringOverlapSwitch(t *testing.T) {
	f := serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "3"))}, "Start(2 reload)")
	f.want(Exited{ID: 1, Code: 1}, "Hold Gone(1)")
	f.want(Ready{ID: 2}, "Route(2) Switched(ok=true) Reply(<nil>)")
	if f.m.held || f.m.Serving.ID != 2 {
		t.Fatalf("%+v", f.m)
	}
}

// A reload that changes nothing the engine runs is adopted without a
// switch (the proxy's own limits may have changed).
func TestSameCommandIsAdopted(t *testing.T) {
	f := serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "4"))}, "Adopt Reply(<nil>)")
}

func TestFirstStartFailsExits(t *testing.T) {
	f := &fake{t: t, m: NewMachine(planOf(), limits), now: t0}
	f.want(Begin{}, "Start(1 start)")
	f.want(Ready{ID: 1, Err: errors.New("no model")}, "Exit(2)")
}

// A first start not ready within the ready timeout, with no restart
// policy: the held requests are told that speclaunch stopped the engine
// at the ready timeout (a Cut before the exit), as a signal during the load
// is said; the exit's own close told them "the engine exited", which it
// had not.
func TestFirstStartReadyTimeoutSaysSo(t *testing.T) {
	f := &fake{t: t, m: NewMachine(planOf(), limits), now: t0}
	f.want(Begin{}, "Start(1 start)")
	timedOut := fmt.Errorf("sim did not become ready at http://127.0.0.1:1/health: %w", &supervise.TimeoutError{After: 3 * time.Second})
	f.want(Ready{ID: 1, Err: timedOut}, "Cut Exit(2)")
	want := proxy.Cause{What: "speclaunch stopped the engine", Why: "it was not ready within the ready timeout, 3s"}
	if c := f.last[0].(Cut); c.Cause != want {
		t.Errorf("cut %+v, want %+v", c.Cause, want)
	}
}

// A reload during the first engine's start, or a restart's, waits for it
// and says so as a start, not a switch (SIGHUP during the first load said
// "a switch is under way"); one during a switch says the switch.
func TestSubmitWhileStartingSaysTheStart(t *testing.T) {
	f := &fake{t: t, m: NewMachine(planOf("--w", "4"), limits), now: t0}
	f.want(Begin{}, "Start(1 start)")
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "4"))}, "")
	f.logged(lvInfo, "an engine is starting; the new settings apply after it")
	f.want(Ready{ID: 1}, "Route(1) Adopt Reply(<nil>)")
	l := limits
	l.Restart = true
	f = serving(t, l)
	f.want(Exited{ID: 1, Code: 137}, "Hold Gone(1)")
	f.wantAfter(time.Second, Tick{}, "Start(2 restart)")
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "4"))}, "")
	f.logged(lvInfo, "an engine is starting; the new settings apply after it")
	f = serving(t, limits)
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "3"))}, "Start(2 reload)")
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "5"))}, "")
	f.logged(lvInfo, "a switch is under way; the new settings apply after it")
}

// A reload of the same settings while a crashed engine waits its back-off
// is adopted, and the restart keeps its time: it started the engine at
// once, so a SIGHUP storm restarted a crashing engine as fast as it came.
// New settings still start at once.
func TestSubmitDuringRestartBackoff(t *testing.T) {
	l := limits
	l.Restart = true
	f := serving(t, l)
	f.want(Exited{ID: 1, Code: 137}, "Hold Gone(1)")
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "4"))}, "Adopt Reply(<nil>)")
	f.logged(lvInfo, "restarts with these settings once its back-off ends")
	f.wantAfter(time.Second, Tick{}, "Start(2 restart)")
	f = serving(t, l)
	f.want(Exited{ID: 1, Code: 137}, "Hold Gone(1)")
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "3"))}, "Start(2 reload)")
}

// An edit that waited for a start that failed is started next, with or
// without a restart policy: the failed settings were retried with
// back-off and the edit lost, or the launcher exited 2 with it unread.
// Waiting settings the same as the failed ones change nothing.
func TestStartFailedStartsTheSettingsThatWaited(t *testing.T) {
	for _, restart := range []bool{false, true} {
		l := limits
		l.Restart = restart
		f := &fake{t: t, m: NewMachine(planOf("--w", "4"), l), now: t0}
		f.want(Begin{}, "Start(1 start)")
		f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "3"))}, "")
		f.want(Ready{ID: 1, Err: errors.New("not ready within the ready timeout")}, "Start(2 reload)")
		f.logged(lvError, "starting the settings that waited for it")
	}
	f := &fake{t: t, m: NewMachine(planOf("--w", "4"), limits), now: t0}
	f.want(Begin{}, "Start(1 start)")
	f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "4"))}, "")
	f.want(Ready{ID: 1, Err: errors.New("not ready")}, "Exit(2)")
}

func TestSubmitWhileStoppingIsRefused(t *testing.T) {
	f := serving(t, limits)
	f.want(Signal{Sig: syscall.SIGTERM}, "Refuse Watch(1)")
	f.want(Submit{Job: job(KindAdapt, key.SwitchOverlap, planOf("--w", "3"))}, "Reply(speclaunch is stopping)")
}

// A signal while a crashed engine waits its back-off: nothing serves and
// nothing starts, so the launcher exits at once, as after a signal during
// a load (128+signal), and says so; the crash's own code is not its exit.
func TestSignalDuringRestartBackoff(t *testing.T) {
	l := limits
	l.Restart = true
	f := serving(t, l)
	f.wantAfter(5*time.Second, Exited{ID: 1, Code: 137}, "Hold Gone(1)")
	f.want(Signal{Sig: syscall.SIGTERM}, "Refuse Cut Exit(143)")
	f.logged(lvInfo, "no engine runs (it was waiting to start again after exiting with code 137)")
	if f.m.Phase != Stopped || !f.m.Deadline().IsZero() {
		t.Fatalf("after the signal: phase %s, deadline %v", f.m.Phase, f.m.Deadline())
	}
}

// An engine that dies of something else while it finishes its requests
// after SIGTERM (the OOM killer: its cut streams let the drain end, so
// speclaunch's stop comes after the death) exits with its code, as a
// crash does; one that the launcher's own stop ended exits 0 (serve makes
// a cut 4).
func TestDeathDuringGracefulStopIsTheEngines(t *testing.T) {
	for _, tc := range []struct {
		name      string
		code      int
		elsewhere string
		want      string
	}{
		{"stopped by speclaunch", 143, "", "Exit(0)"},
		{"killed by speclaunch after the stop timeout", 137, "", "Exit(0)"},
		{"OOM-killed as it drained", 137, "signal 9 (killed), which speclaunch did not send", "Exit(137)"},
		{"crashed before the stop came", 139, "it exited with code 139 before speclaunch stopped it", "Exit(139)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := serving(t, limits)
			f.want(Signal{Sig: syscall.SIGTERM}, "Refuse Watch(1)")
			f.wantAfter(3*time.Second, Drained{ID: 1}, "Stop(1 SIGTERM)")
			f.want(Exited{ID: 1, Code: tc.code, Elsewhere: tc.elsewhere}, tc.want)
		})
	}
}

// The same after a restart whose start failed: the words name the failed
// start, not the crash before it (or "code 0").
func TestSignalDuringBackoffAfterAFailedStart(t *testing.T) {
	l := limits
	l.Restart = true
	f := serving(t, l)
	f.wantAfter(5*time.Second, Exited{ID: 1, Code: 137}, "Hold Gone(1)")
	f.wantAfter(time.Second, Tick{}, "Start(2 restart)")
	f.after(time.Second, Ready{ID: 2, Err: errors.New("port taken")})
	f.want(Signal{Sig: syscall.SIGTERM}, "Refuse Cut Exit(143)")
	f.logged(lvInfo, "after failing to start (port taken)")
}

// A switch's Took runs from its start, the time the follower and the
// adaptive loop price a switch by; one asked for while another ran says
// how long it waited before its start (Waited). Before, a reload that
// waited 3 s behind a switch said nothing of the wait.
func TestSwitchedTookAndWaited(t *testing.T) {
	type step struct {
		after time.Duration
		ev    Event
	}
	reload := func(w string) Event { return Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", w))} }
	cases := []struct {
		name         string
		steps        []step // on a machine whose engine 1 serves; the last ends the switch looked at
		took, waited time.Duration
	}{
		{"at once", []step{{0, reload("3")}, {2 * time.Second, Ready{ID: 2}}}, 2 * time.Second, 0},
		{"behind an overlap switch and its drain", []step{
			{0, reload("3")}, {time.Second, reload("5")}, {2 * time.Second, Ready{ID: 2}},
			{500 * time.Millisecond, Drained{ID: 1}}, {0, Exited{ID: 1}}, {2 * time.Second, Ready{ID: 3}},
		}, 2 * time.Second, 2500 * time.Millisecond},
		{"the latest wins, its own wait", []step{
			{0, reload("3")}, {time.Second, reload("5")}, {time.Second, reload("6")}, {time.Second, Ready{ID: 2}},
			{0, Drained{ID: 1}}, {0, Exited{ID: 1}}, {4 * time.Second, Ready{ID: 3}},
		}, 4 * time.Second, time.Second},
		{"failed behind a switch", []step{
			{0, reload("3")}, {time.Second, reload("5")}, {2 * time.Second, Ready{ID: 2}},
			{0, Drained{ID: 1}}, {0, Exited{ID: 1}}, {time.Second, Ready{ID: 3, Err: errors.New("no binary")}},
		}, time.Second, 2 * time.Second},
		{"after a waited one, at once", []step{
			{0, reload("3")}, {time.Second, reload("5")}, {time.Second, Ready{ID: 2}},
			{0, Drained{ID: 1}}, {0, Exited{ID: 1}}, {time.Second, Ready{ID: 3}},
			{0, Drained{ID: 2}}, {0, Exited{ID: 2}}, {0, reload("7")}, {3 * time.Second, Ready{ID: 4}},
		}, 3 * time.Second, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := serving(t, limits)
			for _, s := range c.steps {
				f.after(s.after, s.ev)
			}
			var sw *Switched
			for _, a := range f.last {
				if a, ok := a.(Switched); ok {
					sw = &a
				}
			}
			if sw == nil {
				t.Fatalf("the last step switched nothing: %s", summary(f.last))
			}
			if sw.Took != c.took || sw.Waited != c.waited {
				t.Errorf("took %s waited %s, want %s and %s", sw.Took, sw.Waited, c.took, c.waited)
			}
		})
	}
}

// A width switch's "switching engines" line leaves its why to the
// adaptive loop's or the follower's line before it (it was said there in
// full, then again cut short here); a reload's says it.
func TestSwitchingLineWhy(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		why  bool
	}{{KindReload, true}, {KindAdapt, false}, {KindFollow, false}} {
		f := serving(t, limits)
		j := job(tc.kind, key.SwitchOverlap, planOf("--w", "3"))
		j.Reason = "the load has sat at 4+"
		f.want(Submit{Job: j}, "Start(2 "+tc.kind.String()+")")
		found := false
		for _, a := range f.last {
			if l, ok := a.(Log); ok && l.Msg == "switching engines" {
				found = true
				if got := slices.Contains(l.Attrs, any("why")); got != tc.why {
					t.Errorf("%s: why given %v, want %v: %v", tc.kind, got, tc.why, l.Attrs)
				}
				if !tc.why && !slices.Contains(l.Attrs, any(tc.kind.String())) {
					t.Errorf("%s: the line names no kind in place of why: %v", tc.kind, l.Attrs)
				}
			}
		}
		if !found {
			t.Errorf("%s: no \"switching engines\" line", tc.kind)
		}
	}
}
