package serve

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/instance"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/metrics"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/supervise"
	"github.com/speclaunch/speclaunch/internal/watch"
	"github.com/speclaunch/speclaunch/internal/width"
)

// schedLoad is a reading of the files: an operator schedule, and an
// engine argument an edit can change.
type schedLoad struct {
	sched, arg string
	adapt      bool // adapt.enabled
}

func (l schedLoad) Files() []string { return nil }

func (schedLoad) LogNotices(*slog.Logger) {}

func (l schedLoad) Settings() config.Settings {
	var s config.Settings
	s.Engine.Value, s.Model.Value, s.Adapt.Value = key.Sim, "target", l.adapt
	return s
}

func (l schedLoad) Build(o plan.Options) (*plan.Plan, error) {
	s, err := schedule.Parse(l.sched, "override")
	if err != nil {
		return nil, err
	}
	p := &plan.Plan{Resolution: width.Resolution{Source: width.Override, Reason: "operator schedule", Schedule: s}.AtLoad(o.Load), Settings: l.Settings()}
	p.Launch.Argv = []string{os.Args[0], "--width", strconv.Itoa(p.Resolution.Width), l.arg}
	return p, nil
}

type schedLoader struct{ l *schedLoad }

func (f schedLoader) Load() (Load, error) { return *f.l, nil }

// Reloads in a row on a server the follower left at 4+ and that is idle
// now: an edit that changes the engine starts it at the width for the
// load now (1 request, width 6); the next, a comment, changes nothing,
// whatever the load (the plan in force is the one the first reload built,
// not the bucket the follower last chose).
func TestReloadsInARowStartAtTheLoadNow(t *testing.T) {
	files := &schedLoad{sched: "1:6,2-3:4,4+:1", arg: "a"}
	sv := &launcher{c: Config{Loader: schedLoader{files}}, st: newServeStatus(&plan.Plan{}), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cur, _ := files.Build(plan.Options{Load: 4}) // the follower's last switch
	sv.st.setFollow(FollowStatus{Schedule: "1:6,2-3:4,4+:1", Bucket: "4+", Load: 0, Updated: time.Now()})

	files.arg = "b" // an edit of the engine's arguments
	np, _, changed, err := sv.reload(cur, watch.Change{Path: "p.toml", Reason: "write"})
	if err != nil || !changed || np.Resolution.Width != 6 {
		t.Fatalf("first reload: %v, changed %v, width %d, want a switch to width 6", err, changed, widthOf(np))
	}
	// A comment, with two requests in flight by now: the engine stays
	// (the follower moves it if the load stays).
	sv.st.setFollow(FollowStatus{Schedule: "1:6,2-3:4,4+:1", Bucket: "1", Load: 2.2, Updated: time.Now()})
	np2, _, changed, err := sv.reload(np, watch.Change{Path: "p.toml", Reason: "write"})
	if err != nil || changed || np2.Resolution.Width != 6 {
		t.Errorf("second reload: %v, changed %v, width %d, want nothing to do", err, changed, widthOf(np2))
	}
	// Busy at four now: an edit builds the 4+ bucket's width, off.
	sv.st.setFollow(FollowStatus{Schedule: "1:6,2-3:4,4+:1", Bucket: "1", Load: 3.9, Updated: time.Now()})
	files.arg = "c"
	np3, _, changed, err := sv.reload(np2, watch.Change{Path: "p.toml", Reason: "write"})
	if err != nil || !changed || np3.Resolution.Load != 4 {
		t.Errorf("busy reload: %v, changed %v, load %d, want load 4", err, changed, np3.Resolution.Load)
	}
}

// An operator schedule set while the adaptive loop's width serves (its
// width kept on a reload, but an operator's wins) starts at the width for
// the load now: four in flight ran the 1-request width 5 for 87 s before
// the follower moved it (an operator campaign).
func TestScheduleEditUnderAdaptStartsAtTheLoadNow(t *testing.T) {
	files := &schedLoad{sched: "1:5,2+:1", arg: "a", adapt: true}
	sv := &launcher{c: Config{Loader: schedLoader{files}}, st: newServeStatus(&plan.Plan{}), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	sv.ctl.adapted = 1 // the adaptive loop's last switch
	cur := &plan.Plan{Resolution: width.AdaptedTo(1, "adaptive", key.Key{}), Settings: files.Settings()}
	cur.Launch.Argv = []string{os.Args[0], "--width", "1", "x"}
	sv.st.setFollow(FollowStatus{Schedule: "1+:1", Bucket: "1+", Load: 3.9, Updated: time.Now()})
	np, _, changed, err := sv.reload(cur, watch.Change{Path: "p.toml", Reason: "write"})
	if err != nil || !changed || widthOf(np) != 1 || np.Resolution.Load != 4 {
		t.Fatalf("reload: %v, changed %v, width %d at load %d, want width 1 at load 4", err, changed, widthOf(np), np.Resolution.Load)
	}
}

// The status page describes the serving engine by the plan in force when
// a reload's plan runs that very engine (a schedule edit that left the
// width in force: "nothing to do"), and gives the load its width was
// chosen for even when it is 0.
func TestStatusFollowsAReloadThatKeptTheEngine(t *testing.T) {
	files := &schedLoad{sched: "1-3:8,4+:3", arg: "a"}
	old, _ := files.Build(plan.Options{Load: 1})
	files.sched = "1-3:8,4+:2"
	edited, _ := files.Build(plan.Options{Load: 1})
	sv := &launcher{st: newServeStatus(old), log: slog.New(slog.NewTextHandler(io.Discard, nil)), met: metrics.New(metrics.Sources{})}
	sv.force.take(old, nil)
	sv.st.serving(&server.Instance{Plan: old, Proc: &supervise.Process{}, Info: &instance.Engine{}})
	sv.st.chosen(old, 0.4)                                                                           // the follower chose width 8 at a mean of 0.4 requests
	sv.adopted(&server.Job{Kind: server.KindReload, Plan: edited, Reason: "reload: p.toml (write)"}) // the runtime's "nothing to do"
	status := func() (e struct {
		Schedule string
		Bucket   string
		Load     *float64
	}) {
		rec := httptest.NewRecorder()
		sv.st.handler(sv).ServeHTTP(rec, httptest.NewRequest("GET", "/speclaunch/status", nil))
		var out struct{ Engine json.RawMessage }
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out.Engine, &e); err != nil {
			t.Fatal(err)
		}
		return e
	}
	if e := status(); e.Schedule != "1-3:8,4+:2" || e.Bucket != "1-3" || e.Load == nil || *e.Load != 0.4 {
		t.Errorf("engine: schedule %q bucket %q load %v, want the edited schedule at 1-3, load 0.4", e.Schedule, e.Bucket, e.Load)
	}
	// The metrics say what the status page says.
	if m := string(sv.met.Text()); !strings.Contains(m, `bucket="1-3"`) || !strings.Contains(m, "speclaunch_width_load 0.4") {
		t.Errorf("metrics after the kept reload:\n%s", m)
	}
	// An edit that needs another engine: the running one is described by
	// its own plan until the switch.
	files.arg = "b"
	other, _ := files.Build(plan.Options{Load: 1})
	sv.force.take(other, nil)
	sv.st.serving(&server.Instance{Plan: old, Proc: &supervise.Process{}, Info: &instance.Engine{}})
	if e := status(); e.Schedule != "1-3:8,4+:3" {
		t.Errorf("engine: schedule %q, want the running engine's own", e.Schedule)
	}
	// The follower chose the running width on an idle server: load 0 is
	// shown, not dropped.
	sv.force.take(old, nil)
	sv.st.chosen(old, 0)
	if e := status(); e.Load == nil || *e.Load != 0 {
		t.Errorf("engine: load %v, want 0", e.Load)
	}
}

// The fix for a public address that cannot be bound follows why.
func TestBindFix(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "listen", Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}, "stop what holds it"},
		{&net.OpError{Op: "listen", Err: os.NewSyscallError("bind", syscall.EACCES)}, "ports below 1024 need privileges"},
		{&net.OpError{Op: "listen", Err: os.NewSyscallError("bind", syscall.EADDRNOTAVAIL)}, "set --host"},
		{&net.DNSError{Err: "no such host", Name: "nosuchhost.invalid"}, "set --host"},
	} {
		if got := bindFix(c.err); !strings.Contains(got, c.want) {
			t.Errorf("bindFix(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// An edit during the follower's switch to another bucket is built at the
// load now: it applies after that switch as nothing to do, where it was
// built at the bucket the switch left and undid it (width 4 → 8 under six
// clients, then the follower switched back).
func TestReloadDuringAFollowSwitch(t *testing.T) {
	files := &schedLoad{sched: "1:6,2-3:4,4+:1", arg: "a"}
	sv := &launcher{c: Config{Loader: schedLoader{files}}, st: newServeStatus(&plan.Plan{}), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cur, _ := files.Build(plan.Options{Load: 1}) // in force: the follower is switching away from it
	sv.force.setPhase(server.Switching)
	sv.st.setFollow(FollowStatus{Schedule: "1:6,2-3:4,4+:1", Bucket: "4+", Load: 3.9, Updated: time.Now()})
	np, _, _, err := sv.reload(cur, watch.Change{Path: "p.toml", Reason: "write"}) // a comment
	if err != nil || np.Resolution.Load != 4 {
		t.Fatalf("reload during a switch: %v, built at load %d, want 4 (the bucket the switch goes to)", err, np.Resolution.Load)
	}
}

// noticeLoad is a reading whose files say something of themselves: a
// tuned layer emptied under serve.
type noticeLoad struct {
	schedLoad
	notice string
}

func (l noticeLoad) LogNotices(log *slog.Logger) {
	if l.notice != "" {
		log.Warn(l.notice)
	}
}

type noticeLoader struct{ l *noticeLoad }

func (f noticeLoader) Load() (Load, error) { return *f.l, nil }

// A reload says what the files say of themselves (Load.LogNotices), once
// per reload, as the start said it: a tuned layer emptied under serve
// changed the width and said nothing of the file. A switch that reads the
// files again (an adaptive switch's rebuild) says nothing more.
func TestReloadSaysWhatTheFilesSay(t *testing.T) {
	const empty = "the tuned layer T is empty (nothing but whitespace and comments)"
	for _, c := range []struct {
		name     string
		notice   string
		reloads  int
		rebuilds int
		want     int // warn lines naming the layer
	}{
		{"an emptied layer, one reload", empty, 1, 0, 1},
		{"an emptied layer, two reloads", empty, 2, 0, 2},
		{"nothing to say", "", 1, 0, 0},
		{"an adaptive switch's rebuild", empty, 0, 2, 0},
		{"a reload, then a rebuild", empty, 1, 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := &noticeLoad{schedLoad{sched: "1:6,2+:4", arg: "a"}, c.notice}
			var log strings.Builder
			sv := &launcher{c: Config{Loader: noticeLoader{files}}, st: newServeStatus(&plan.Plan{}), log: slog.New(slog.NewTextHandler(&log, nil))}
			cur, _ := files.Build(plan.Options{Load: 1})
			sv.force.take(cur, *files)
			for i := 0; i < c.reloads; i++ {
				files.arg = "edit" + strconv.Itoa(i) // the engine changes, as the width did
				if _, _, _, err := sv.reload(cur, watch.Change{Path: "T", Reason: "write"}); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < c.rebuilds; i++ {
				if _, _, err := sv.rebuild(plan.Options{Adapted: 4, AdaptReason: "test"}, "adaptive switch"); err != nil {
					t.Fatal(err)
				}
			}
			if got := strings.Count(log.String(), "level=WARN msg=\""+empty); got != c.want {
				t.Errorf("said %d times, want %d:\n%s", got, c.want, log.String())
			}
		})
	}
}

// A reload adopted while a crashed engine waits its back-off says nothing
// of an engine "now serving": none serves (each SIGHUP of a storm said
// it). With one serving, the kept engine is said.
func TestAdoptedDuringBackoffSaysNoEngineServes(t *testing.T) {
	files := &schedLoad{sched: "1-3:8,4+:3", arg: "a"}
	old, _ := files.Build(plan.Options{Load: 1})
	files.sched = "1-3:8,4+:2"
	edited, _ := files.Build(plan.Options{Load: 1})
	for _, serving := range []bool{false, true} {
		var log strings.Builder
		sv := &launcher{st: newServeStatus(old), log: slog.New(slog.NewTextHandler(&log, nil)), met: metrics.New(metrics.Sources{})}
		sv.force.take(old, nil)
		if serving {
			sv.st.serving(&server.Instance{Plan: old, Proc: &supervise.Process{}, Info: &instance.Engine{}})
		}
		sv.adopted(&server.Job{Kind: server.KindReload, Plan: edited, Reason: "reload: SIGHUP"})
		if said := strings.Contains(log.String(), "is the one now serving"); said != serving {
			t.Errorf("serving %v: said an engine serves %v:\n%s", serving, said, log.String())
		}
	}
}

// A reload's warning about start-only adapt settings names each one that
// changed, by its profile key; a retired one, which tunes nothing, is
// named apart.
func TestAdaptChangesNamed(t *testing.T) {
	var a config.Settings
	for _, tc := range []struct {
		name          string
		edit          func(*config.Settings)
		want, retired []string
	}{
		{"nothing changed", func(*config.Settings) {}, nil, nil},
		{"enabled", func(s *config.Settings) { s.Adapt.Value = true }, []string{"adapt.enabled"}, nil},
		{"window and trials", func(s *config.Settings) { s.AdaptWindow.Value = time.Minute; s.AdaptTrials.Value = 3 }, []string{"adapt.trials", "adapt.window"}, nil},
		{"margin alone (retired)", func(s *config.Settings) { s.AdaptMargin.Value = 0.1 }, nil, []string{"adapt.margin"}},
		{"every one", func(s *config.Settings) {
			s.Adapt.Value, s.AdaptMaxWidth.Value, s.AdaptExplore.Value, s.AdaptMargin.Value = true, 9, 3, 0.1
			s.AdaptMinCycles.Value, s.AdaptWindow.Value, s.AdaptTrials.Value = 64, time.Minute, 3
		}, []string{"adapt.enabled", "adapt.max_width", "adapt.min_cycles", "adapt.trials", "adapt.window"}, []string{"adapt.explore_width", "adapt.margin"}},
	} {
		b := a
		tc.edit(&b)
		if got, ret := adaptChanges(a, b, false), adaptChanges(a, b, true); !slices.Equal(got, tc.want) || !slices.Equal(ret, tc.retired) {
			t.Errorf("%s: %v and retired %v, want %v and %v", tc.name, got, ret, tc.want, tc.retired)
		}
	}
}
