package serve

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/control"
	"github.com/speclaunch/speclaunch/internal/follow"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/metrics"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/width"
)

func schedPlan(t *testing.T, e key.Engine, text string, load int) *plan.Plan {
	t.Helper()
	s, err := schedule.Parse(text, "override")
	if err != nil {
		t.Fatal(err)
	}
	p := &plan.Plan{Resolution: width.Resolution{Source: width.Override, Reason: "operator schedule", Schedule: s}.AtLoad(load)}
	p.Settings.Engine = config.Field[key.Engine]{Value: e}
	return p
}

// serve follows a schedule of several widths on a one-width engine behind
// the proxy with the adaptive loop off, and says why it does not otherwise.
func TestFollowOff(t *testing.T) {
	cases := []struct {
		e                 key.Engine
		sched             string
		proxied, adapting bool
		want              string // "" = follows
	}{
		{key.Sim, "1-3:5,4+:1", true, false, ""},
		{key.LlamaCpp, "1:6,2-3:4,4+:1", true, false, ""},
		{key.MLXCEL, "1:6,2+:4", true, false, ""},
		{key.Sim, "4", true, false, "one width"},
		{key.Sim, "1:4,2+:4", true, false, "one width"},
		{key.VLLM, "1:6,2+:4", true, false, "vllm is given"},
		{key.SGLang, "1:6,2+:4", true, false, "sglang is given"},
		{key.Sim, "1:6,2+:4", false, false, "the proxy is off"},
		{key.LlamaCpp, "1:6,2+:4", true, true, "the adaptive width is on"},
	}
	for _, c := range cases {
		got := FollowOff(schedPlan(t, c.e, c.sched, 1), c.proxied, c.adapting)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s %s proxied=%v adapting=%v: %q, want %q", c.e, c.sched, c.proxied, c.adapting, got, c.want)
		}
	}
}

// The status page's bucket and load: the follower's measured load for the
// plan it switched to (as its decision gives it, to a tenth: the figure
// the switch's log line says), else the load the plan was built for.
func TestBucketInForce(t *testing.T) {
	st := &serveStatus{}
	launch, four := schedPlan(t, key.Sim, "1-3:5,4+:1", 0), schedPlan(t, key.Sim, "1-3:5,4+:1", 4)
	if b, l := st.bucketInForce(launch); b != "1-3" || l != 1 {
		t.Errorf("launch: %s %v", b, l)
	}
	st.chosen(four, 3.9)
	if b, l := st.bucketInForce(four); b != "4+" || l != 3.9 {
		t.Errorf("followed: %s %v", b, l)
	}
	if b, l := st.bucketInForce(schedPlan(t, key.Sim, "1-3:5,4+:1", 4)); b != "4+" || l != 4 {
		t.Errorf("rebuilt at 4: %s %v", b, l)
	}
	// An adaptive switch: the learnt schedule's bucket and the load that
	// caused it, not the flat schedule of the adapted plan.
	adapted := &plan.Plan{Resolution: width.AdaptedTo(1, "adaptive: classic", key.Key{})}
	st.chosenAdapt(1, "2-4", 3.9)
	if b, l := st.bucketInForce(adapted); b != "2-4" || l != 3.9 {
		t.Errorf("adapted: %s %v", b, l)
	}
	if s := st.scheduleOf(adapted); s != "1+:1" {
		t.Errorf("adapted, no learnt schedule shown yet: %s", s)
	}
	st.setAdapt(control.Status{Schedule: "1:16,2-4:1,5-8:16,9+:16"})
	if s := st.scheduleOf(adapted); s != "1:16,2-4:1,5-8:16,9+:16" {
		t.Errorf("adapted: schedule %s, want the learnt one its bucket belongs to", s)
	}
	st.chosenAdapt(6, "1", 1)
	if b, l := st.bucketInForce(adapted); b != "1+" || l != 1 {
		t.Errorf("adapted, another width chosen since: %s %v", b, l)
	}
	// The launch's engine the controller kept (no switch of its): the
	// controller's bucket, load and learnt schedule, not the plan's "1+"
	// at load 1; not where it serves another width.
	kept := schedPlan(t, key.Sim, "1+:5", 0)
	st = &serveStatus{}
	st.setAdapt(control.Status{Width: 5, Bucket: "2-4", Load: 3.9, Schedule: "1:5,2-4:5,5-8:5,9+:5"})
	if b, l := st.bucketInForce(kept); b != "2-4" || l != 3.9 || st.scheduleOf(kept) != "1:5,2-4:5,5-8:5,9+:5" {
		t.Errorf("kept by the controller: %s %v %s", b, l, st.scheduleOf(kept))
	}
	st.setAdapt(control.Status{Width: 6, Bucket: "2-4", Load: 3.9, Schedule: "1:5,2-4:6,5-8:5,9+:5"})
	if b, l := st.bucketInForce(kept); b != "1+" || l != 1 || st.scheduleOf(kept) != "1+:5" {
		t.Errorf("the controller serves another width: %s %v %s", b, l, st.scheduleOf(kept))
	}
}

// The gains the follower reads from a load sweep's record: the level in
// the bucket it moves to, that width's median over the running one's.
func TestRecordGain(t *testing.T) {
	arm := func(kind string, w int, med float64) record.Arm {
		return record.Arm{Kind: kind, Width: w, Status: record.StatusOK, Stats: record.Stats{Median: med}}
	}
	rec := &record.Record{Levels: []record.Level{
		{Concurrency: 1, Arms: []record.Arm{arm(record.KindClassic, 0, 300), arm(record.KindWidth, 5, 500)}},
		{Concurrency: 4, Arms: []record.Arm{arm(record.KindClassic, 0, 930), arm(record.KindWidth, 5, 900)}},
		{Concurrency: 8, Arms: []record.Arm{arm(record.KindClassic, 0, 1500), arm(record.KindWidth, 5, 1000)}},
	}}
	g := recordGain(rec)
	s, _ := schedule.Parse("1-3:5,4+:1", "tuned")
	if v, ok := g(s[0], s[1]); !ok || v < 0.033 || v > 0.034 {
		t.Errorf("5 → off at 4+: %v %v, want +3.3 %% (level 4, not 8)", v, ok)
	}
	if v, ok := g(s[1], s[0]); !ok || v < 0.66 || v > 0.67 {
		t.Errorf("off → 5 at 1-3: %v %v, want +66.7 %%", v, ok)
	}
	if _, ok := g(s[0], schedule.Bucket{Lo: 2, Hi: 3, Width: 4}); ok {
		t.Error("a gain without a level in the bucket")
	}
}

// A reload that starts a new engine builds it for the load now: the
// follower's window mean once it has one, else the requests in flight;
// never below one request.
func TestReloadLoad(t *testing.T) {
	now := time.Unix(1e9, 0)
	full := func(load float64) *FollowStatus {
		return &FollowStatus{Bucket: "4+", Load: load, Updated: now.Add(-follow.Tick)}
	}
	cases := []struct {
		name     string
		f        *FollowStatus
		inFlight int
		want     int
	}{
		{"no follower, idle", nil, 0, 1},
		{"no follower, busy", nil, 3, 3},
		{"idle after a busy spell: the window says so", full(0), 0, 1},
		{"busy: the window's mean, rounded", full(3.6), 1, 4},
		{"a window under one request", full(0.4), 2, 1},
		{"no full window yet: requests in flight", &FollowStatus{Updated: now}, 5, 5},
		{"not following", &FollowStatus{Off: "one width at every load", Bucket: "1+", Load: 6, Updated: now}, 2, 2},
		{"a follower that stopped speaking", &FollowStatus{Bucket: "4+", Load: 6, Updated: now.Add(-time.Minute)}, 2, 2},
	}
	for _, c := range cases {
		if got := reloadLoad(c.f, c.inFlight, now); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// The follower prices its next switches at the switch's own time, as the
// runtime recorded it, not at its wait for the reply (a campaign saw a
// switch queued 34 s behind a drain priced at 35.1 s, its record 1.1 s);
// a switch it asked for that no record shows (a reload overtook it)
// reads as not run.
func TestLastSwitch(t *testing.T) {
	st := &serveStatus{}
	st.switched(switchRecord{Kind: "follow", OK: true, StartMS: 900})
	before := st.switchCount()
	for _, tc := range []struct {
		name string
		add  []switchRecord
		took time.Duration
		ran  bool
	}{
		{"none since", nil, 0, false},
		{"a reload's", []switchRecord{{Kind: "reload", OK: true, StartMS: 5000}}, 0, false},
		{"the follower's", []switchRecord{{Kind: "follow", OK: true, StartMS: 1107}}, 1107 * time.Millisecond, true},
		{"the follower's after a wait", []switchRecord{{Kind: "follow", OK: true, StartMS: 1107, WaitedMS: 3000}}, 1107 * time.Millisecond, true},
		{"a failed one", []switchRecord{{Kind: "follow", OK: false, StartMS: 300}}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &serveStatus{switches: append([]switchRecord(nil), st.switches...), total: st.total}
			for _, r := range tc.add {
				s.switched(r)
			}
			took, ran := s.lastSwitch("follow", before)
			if took != tc.took || ran != tc.ran {
				t.Errorf("lastSwitch = %v, %v; want %v, %v", took, ran, tc.took, tc.ran)
			}
		})
	}
}

// A wait on an engine beside the serving one past its bound is said once
// per spell: an engine the kernel cannot end would otherwise hold every
// switch back in silence.
func TestBusyWatchSaysALongWaitOnce(t *testing.T) {
	var b busyWatch
	bound := time.Minute
	looks := []struct {
		busy bool
		at   time.Duration
		say  bool
	}{
		{true, 0, false}, {true, 30 * time.Second, false}, {true, 61 * time.Second, true}, {true, 2 * time.Minute, false},
		{false, 3 * time.Minute, false}, // the spell ends
		{true, 4 * time.Minute, false}, {true, 5*time.Minute + time.Second, true},
	}
	for _, l := range looks {
		if _, say := b.see(l.busy, time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC).Add(l.at), bound); say != l.say {
			t.Errorf("at %v (busy %v): say %v, want %v", l.at, l.busy, say, l.say)
		}
	}
}

// A schedule that comes by a reload is followed: the follower started
// with the first engine only, so a schedule edited in (or written by a
// tune) while serve ran was never followed, the engine kept its width at
// four requests in flight. One follower runs however many reloads come.
func TestFollowerStartsForAReloadedSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sv := &launcher{px: proxy.New(proxy.Options{}), log: slog.New(slog.DiscardHandler), st: newServeStatus(&plan.Plan{}), met: metrics.New(metrics.Sources{})}
		sv.ctl.started = true // the first engine served, with one width
		sv.adopt(schedPlan(t, key.Sim, "4", 1), nil)
		if !sv.ctl.noFollower() {
			t.Fatal("a follower for one width at every load")
		}
		sv.adopt(schedPlan(t, key.Sim, "1:6,2-3:4,4+:1", 1), nil)
		stop := sv.ctl.takeStopFollow()
		if stop == nil {
			t.Fatal("no follower for the schedule a reload brought")
		}
		stop()
		running := 0
		sv.ctl.ran(func() { running++ }, true) // one runs
		sv.adopt(schedPlan(t, key.Sim, "1:5,2+:1", 1), nil)
		if sv.ctl.takeStopFollow()(); running != 1 {
			t.Error("a second follower started for a second reload")
		}
	})
}

// The follower's first switch is priced by the first engine that served,
// whichever start it was: after a failed first start, the edit that waited
// for it starts the engine, and the follower priced its switch at 0 s (the
// default 10.3 s then, nine times slower to switch than after a normal
// start). Later starts do not move it.
func TestFirstServedStartPricesTheFollower(t *testing.T) {
	var c controllers
	c.startTook(1100 * time.Millisecond) // the edit's engine, the first that served
	c.startTook(9 * time.Second)         // a later switch's
	if _, d := c.forFollower(); d != 1100*time.Millisecond {
		t.Errorf("the follower's start %v, want the first engine that served (1.1s)", d)
	}
}

// Once an operator width ended the adaptive loop, the follow block says
// why no schedule is followed now, its switches kept: it went on saying
// "the adaptive width is on" until serve stopped.
func TestFollowStatusFollowsAReloadedWidth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sv := &launcher{px: proxy.New(proxy.Options{}), log: slog.New(slog.DiscardHandler), st: newServeStatus(&plan.Plan{}), met: metrics.New(metrics.Sources{})}
		sv.ctl.started = true
		sv.st.setFollow(FollowStatus{Schedule: "1:6,2+:1", Off: "the adaptive width is on: serve follows the schedule it learns", Switches: 3})
		sv.adopt(schedPlan(t, key.Sim, "4", 1), nil) // the operator's width; the loop has ended
		f := sv.st.follow
		if f == nil || f.Off != "one width at every load" || f.Switches != 3 || f.Schedule != "1+:4" {
			t.Errorf("follow status after an operator width: %+v", f)
		}
		fresh := &launcher{px: proxy.New(proxy.Options{}), log: slog.New(slog.DiscardHandler), st: newServeStatus(&plan.Plan{}), met: metrics.New(metrics.Sources{})}
		fresh.ctl.started = true
		if fresh.adopt(schedPlan(t, key.Sim, "4", 1), nil); fresh.st.follow != nil {
			t.Errorf("a follow block for one width where none was shown: %+v", fresh.st.follow)
		}
	})
}
