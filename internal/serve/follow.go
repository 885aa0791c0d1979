package serve

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/speclaunch/speclaunch/internal/follow"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/server"
)

// FollowOff says why serve does not follow a plan's width schedule, ""
// when it does: a schedule of several widths on an engine that runs one
// width (llama.cpp, mlxcel, sim), behind the proxy (whose in-flight count
// it reads and whose switches lose no request), with the adaptive width
// off (it follows the schedule it learns by the same rule, control.go).
func FollowOff(p *plan.Plan, proxied, adapting bool) string {
	s := p.Resolution.Schedule
	switch e := p.Settings.Engine.Value; {
	case len(s) < 2 || s.IsFlat():
		return "one width at every load"
	case e != key.LlamaCpp && e != key.MLXCEL && e != key.Sim:
		return string(e) + " is given the schedule's width at one request in flight (docs/engines.md, Width schedules)"
	case !proxied:
		return "the proxy is off (--no-proxy): a switch would fail requests; the width for one request in flight runs"
	case adapting:
		return "the adaptive width is on: serve follows the schedule it learns, by the same rule (status: adapt)"
	}
	return ""
}

// FollowStatus is the follower as /speclaunch/status shows it.
type FollowStatus struct {
	Schedule string    `json:"schedule"`
	Bucket   string    `json:"bucket"`        // the bucket whose width runs, in requests in flight
	Load     float64   `json:"load"`          // mean generation requests in flight over the last window
	Note     string    `json:"note"`          // the last decision, or why not yet
	Switches int       `json:"switches"`      // made by the follower since serve started
	Off      string    `json:"off,omitempty"` // why it does not follow
	Updated  time.Time `json:"updated"`
}

// runFollow follows the schedule of the plan in force until the returned
// func stops it (and waits); nil when serve does not follow it.
func (sv *launcher) runFollow(p *plan.Plan) func() {
	adapting, started := sv.ctl.forFollower()
	if why := FollowOff(p, sv.px != nil, adapting); why != "" {
		sv.followOff(p, why)
		return nil
	}
	sv.log.Info("following the width schedule by requests in flight", "schedule", p.Resolution.Schedule.Describe(), "switch_priced_at", started.Round(10*time.Millisecond).String())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sv.follow(ctx, p, started)
	}()
	return func() { cancel(); <-done }
}

// followLater starts the follower for the plan a reload brought where
// none runs: the loops start with the first engine, so a schedule that
// came by a reload (an edit, a tune writing its layer), or one an
// operator schedule left when it ended the adaptive loop, was never
// followed. A running follower takes a new schedule itself.
func (sv *launcher) followLater(p *plan.Plan) {
	adapting, _ := sv.ctl.forFollower()
	if !sv.ctl.noFollower() {
		return
	}
	if why := FollowOff(p, sv.px != nil, adapting); why != "" {
		sv.followOff(p, why)
		return
	}
	sv.ctl.ran(sv.runFollow(p), true)
}

// followOff shows why the plan's schedule is not followed: a schedule of
// several widths is logged and shown; one width replaces only a note the
// status already shows, which would stay stale ("the adaptive width is
// on" after an operator width ended the loop), keeping its switches.
func (sv *launcher) followOff(p *plan.Plan, why string) {
	s := p.Resolution.Schedule
	if len(s) > 1 && !s.IsFlat() {
		sv.log.Info("width schedule not followed: "+why, "schedule", s.String())
		sv.st.setFollow(FollowStatus{Schedule: s.String(), Off: why, Switches: sv.st.followSwitches(), Updated: time.Now()})
		return
	}
	if sv.st.hasFollow() {
		sv.st.setFollow(FollowStatus{Schedule: s.String(), Off: why, Switches: sv.st.followSwitches(), Updated: time.Now()})
	}
}

// follow is the follower's loop: a sample of the load (Load) every
// follow.Tick, a switch when the rule asks for one.
func (sv *launcher) follow(ctx context.Context, p *plan.Plan, started time.Duration) {
	cfg := sv.followConfig(p)
	st := follow.New(cfg, widthOf(p), started)
	tick := time.NewTicker(follow.Tick)
	defer tick.Stop()
	switches := sv.st.followSwitches() // an earlier follower's, since serve started
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cur := sv.plan()
		if cur == nil {
			continue
		}
		if s := cur.Resolution.Schedule; s.String() != cfg.Schedule.String() {
			cfg = sv.followConfig(cur) // a reload changed it
			st = follow.Renew(cfg, st, widthOf(cur))
		}
		if len(cfg.Schedule) < 2 || cfg.Schedule.IsFlat() {
			sv.st.setFollow(FollowStatus{Schedule: cfg.Schedule.String(), Off: "one width at every load", Switches: switches, Updated: time.Now()})
			continue
		}
		st.Width = widthOf(cur) // a reload or a restart may have moved it
		var d follow.Decision
		st, d = follow.Step(cfg, st, follow.Observation{Now: time.Now(), InFlight: sv.Load(), Busy: sv.Busy()})
		fs := FollowStatus{Schedule: cfg.Schedule.String(), Bucket: d.From.Range(), Load: d.Load, Note: d.Reason, Switches: switches, Updated: time.Now()}
		if d.From.Width == 0 { // no full window yet: no bucket to name ("0+" was shown)
			fs.Bucket, fs.Note = "", "measuring the load: a full window of requests in flight comes first"
		}
		sv.st.setFollow(fs)
		if d.Capped {
			sv.log.Warn("follow: the hourly cap on switches holds the width", "width", st.Width, "why", d.Reason)
		}
		if !d.Switch {
			continue
		}
		sv.log.Info("follow: switching", "from_width", d.From.Width, "to_width", d.To.Width, "bucket", d.To.Range(), "load", d.Load, "why", d.Reason)
		var took time.Duration
		var ok bool
		st, took, ok = sv.followSwitch(ctx, st, d)
		if ctx.Err() != nil {
			return
		}
		if ok {
			switches++
			sv.log.Debug("follow: switched", "to_width", d.To.Width, "took", took.Round(time.Millisecond).String())
		}
	}
}

// errNoSwitchNeeded: the engine serving already runs the plan a follow
// switch asked for; it was read as a switch a reload overtook.
var errNoSwitchNeeded = errors.New("the serving engine already runs that plan")

// followSwitch runs the switch d asks for and reports it to the rule:
// priced at the switch's own time (the runtime's, not the wait for its
// reply), and not counted when a reload overtook it (another width serves
// than the one asked for).
func (sv *launcher) followSwitch(ctx context.Context, st follow.State, d follow.Decision) (follow.State, time.Duration, bool) {
	before := sv.st.switchCount()
	err := sv.SwitchLoad(ctx, d.To.Lo, d.Load, "follow: "+d.Reason)
	if errors.Is(err, errNoSwitchNeeded) {
		sv.log.Debug("follow: the engine serving already runs the bucket's plan; no switch", "asked", d.To.Width, "width", widthOf(sv.plan()))
		return follow.Overtaken(st, widthOf(sv.plan())), 0, false
	}
	took, ran := sv.st.lastSwitch(server.KindFollow.String(), before)
	if errors.Is(err, server.ErrSuperseded) || err == nil && (!ran || widthOf(sv.plan()) != d.To.Width) {
		sv.log.Info("follow: no switch ran (a reload or another switch overtook it); the width in force serves", "asked", d.To.Width, "width", widthOf(sv.plan()))
		return follow.Overtaken(st, widthOf(sv.plan())), 0, false
	}
	st = follow.Done(st, err == nil, took)
	if err != nil && ctx.Err() == nil {
		sv.log.Warn("follow: the switch did not happen; the width stays", "to_width", d.To.Width, "err", err)
	}
	return st, took, err == nil
}

// Load is the server's load as a width schedule reads it: the clients'
// generation requests the proxy has taken (proxy.Proxy.Generating), on
// every engine (a draining one's streams included) and held for the next
// one. Polls of /v1/models or /metrics and the launcher's own requests
// fill no batch and do not count; 0 in direct mode.
func (sv *launcher) Load() int {
	if sv.px == nil {
		return 0
	}
	return sv.px.Generating()
}

// Busy says why no switch can start now: an engine alive beside the
// serving one (draining after a switch, or starting for one). A wait past
// every bound the runtime keeps (an engine's start, its drain and its
// stop) is said once: an engine the kernel cannot end (a GPU driver hang)
// would hold every switch back.
func (sv *launcher) Busy() string {
	if sv.rt == nil {
		return ""
	}
	n := sv.rt.Beside()
	why := ""
	if n > 0 {
		why = fmt.Sprintf("%d engine(s) still draining or starting beside the serving one", n)
	}
	var bound time.Duration
	if p := sv.plan(); p != nil {
		l := limits(p)
		bound = p.Settings.ReadyTimeout.Value + l.DrainTimeout + l.StopTimeout
	}
	if waited, say := sv.busy.see(why != "", time.Now(), bound); say {
		sv.log.Warn("switches have waited on an engine beside the serving one past its start, drain and stop timeouts; it has not exited (see its pid in the log, and dmesg)", "engines", n, "waited", waited.Round(time.Second).String())
	}
	return why
}

// busyWatch is how long Busy has said busy, to say a wait past its bound
// once.
type busyWatch struct {
	mu    sync.Mutex
	since time.Time
	said  bool
}

// see takes one look: busy or not at now; say is true once, the first
// look past bound of one busy spell.
func (b *busyWatch) see(busy bool, now time.Time, bound time.Duration) (waited time.Duration, say bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !busy {
		b.since, b.said = time.Time{}, false
		return 0, false
	}
	if b.since.IsZero() {
		b.since = now
	}
	waited = now.Sub(b.since)
	if bound > 0 && waited > bound && !b.said {
		b.said = true
		return waited, true
	}
	return waited, false
}

// SwitchLoad switches to the plan in force rebuilt for the schedule's
// bucket at n requests in flight (load is the mean the follower measured,
// as its decision gives it: the status page shows it as it is),
// and returns once the switch has ended. A plan whose engine command is
// the one serving needs no switch (errNoSwitchNeeded).
func (sv *launcher) SwitchLoad(ctx context.Context, n int, load float64, reason string) error {
	cur := sv.plan()
	np, l, err := sv.rebuild(plan.Options{Load: n}, "follow switch")
	if err != nil {
		return err
	}
	if plan.SameEngine(np, cur) {
		return errNoSwitchNeeded
	}
	sv.st.chosen(np, load)
	reply := make(chan error, 1)
	sv.submit(server.KindFollow, reason, cur, np, l, reply)
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// endFollow stops the follower (at shutdown).
func (sv *launcher) endFollow() {
	if stop := sv.ctl.takeStopFollow(); stop != nil {
		stop()
	}
}

// recordGain is the follower's measured gain from a load sweep's record
// (`speclaunch tune`, `bench --concurrency`): at the level in to's bucket
// nearest its low edge, the median rate of to's width over from's (classic
// for width 1). ok is false where the record lacks either arm there.
func recordGain(rec *record.Record) func(from, to schedule.Bucket) (float64, bool) {
	return func(from, to schedule.Bucket) (float64, bool) {
		var lv *record.Level
		for i := range rec.Levels {
			l := &rec.Levels[i]
			if to.Contains(l.Concurrency) && (lv == nil || l.Concurrency < lv.Concurrency) {
				lv = l
			}
		}
		if lv == nil {
			return 0, false
		}
		a, b := levelRate(lv, to.Width), levelRate(lv, from.Width)
		if a <= 0 || b <= 0 {
			return 0, false
		}
		return a/b - 1, true
	}
}

// levelRate is the median tokens/s of the level's measured arm at width w
// (1 = its classic arm), 0 when none.
func levelRate(l *record.Level, w int) float64 {
	for i := range l.Arms {
		a := &l.Arms[i]
		ran := a.RanWidth()
		if a.Kind == record.KindClassic {
			ran = 1
		}
		if ran == w && a.Status == record.StatusOK {
			return a.Stats.Median
		}
	}
	return 0
}

// followConfig is the follower's rule for p's schedule, with the gains of
// the record behind it; a switch those gains rule out is warned of now.
func (sv *launcher) followConfig(p *plan.Plan) follow.Config {
	cfg := follow.Config{Schedule: p.Resolution.Schedule, Gain: sv.gainOf(p)}
	for _, r := range follow.Refused(cfg) {
		sv.log.Warn("follow: " + r)
	}
	return cfg
}

// gainOf reads the record behind the plan's policy entry for the
// follower's gains; nil (the rule's prior) when there is none or it
// cannot be read, which is said once.
func (sv *launcher) gainOf(p *plan.Plan) func(from, to schedule.Bucket) (float64, bool) {
	e := p.Resolution.Entry
	if e == nil || e.Record == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	path := strings.TrimSuffix(e.RecordPath(), ".md") + ".json"
	data, err := record.ReadFile(ctx, path)
	var rec *record.Record
	if err == nil {
		rec, err = record.Decode(data)
	}
	if err == nil && len(rec.Levels) == 0 {
		err = errors.New("it measured one load level")
	}
	if err != nil {
		sv.log.Info("follow: no measured gains between the schedule's widths (the rule's prior applies)", "record", path, "why", err)
		return nil
	}
	sv.log.Info("follow: the gains between the schedule's widths are the record's", "record", path, "levels", len(rec.Levels))
	return recordGain(rec)
}
