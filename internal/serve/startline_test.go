package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/metrics"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/supervise"
	"github.com/speclaunch/speclaunch/internal/width"
)

// The start line's headline names the width the engine starts with, for
// its bucket, before the schedule. Before, the follower's start of
// speculation off for 4+ read "starting engine for the schedule's bucket:
// width 5 at 1-3, off at 4+ (operator schedule)".
func TestStartHeadline(t *testing.T) {
	sched := schedule.Schedule{{Lo: 1, Hi: 3, Width: 5, Source: "override"}, {Lo: 4, Width: 1, Source: "override"}}
	first := schedule.Schedule{{Lo: 1, Hi: 1, Width: 6, Source: "override"}, {Lo: 2, Width: 4, Source: "override"}}
	for _, tc := range []struct {
		name string
		r    width.Resolution
		want string
	}{
		{"off for its bucket", width.Resolution{Source: width.Off, Reason: "operator schedule", OnReason: "operator schedule", Schedule: sched, Load: 4},
			"speculation off for 4+ requests in flight, of the schedule width 5 at 1-3, off at 4+ (operator schedule)"},
		{"a width for its bucket", width.Resolution{Width: 5, Source: width.Override, Reason: "operator schedule", Schedule: sched, Load: 2},
			"draft width 5 for 1-3 requests in flight, of the schedule width 5 at 1-3, off at 4+ (operator schedule)"},
		{"one request", width.Resolution{Width: 6, Source: width.Override, Reason: "operator schedule", Schedule: first, Load: 1},
			"draft width 6 for 1 request in flight, of the schedule width 6 at 1 request, 4 at 2+ (operator schedule)"},
		{"one width: the headline as it was", width.Resolution{Width: 4, Source: width.Override, Reason: "operator override", Schedule: schedule.Flat(4, "override"), Load: 1},
			"draft width 4 (operator override)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &plan.Plan{Resolution: tc.r, Settings: config.Settings{Engine: config.Field[key.Engine]{Value: key.Sim}}}
			if got := startHeadline(p); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// A switch that failed and went back to the previous settings does not
// end on "switched", which read as success right after "engine with the
// new settings failed; going back to the previous ones": the line the
// launcher logs for the runtime's Switched outcome says which it was.
func TestSwitchedLineSaysTheOutcome(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
		want string // the line's message
	}{
		{"the new settings serve", true, "switched"},
		{"the new settings failed", false, "switch failed; went back to the previous settings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := &plan.Plan{Resolution: width.Resolution{Width: 4, Source: width.Measured}}
			np := &plan.Plan{Resolution: width.Resolution{Width: 3, Source: width.Measured}}
			var log bytes.Buffer
			sv := &launcher{log: slog.New(slog.NewJSONHandler(&log, nil)), force: inForce{plan: cur},
				st: newServeStatus(cur), met: metrics.New(metrics.Sources{})}
			s := server.Switched{Job: &server.Job{Kind: server.KindReload, Mode: key.SwitchDrain, Plan: np}, OK: tc.ok, Took: time.Second}
			to := &server.Instance{ID: 3, Plan: np, Proc: &supervise.Process{}}
			if !tc.ok {
				s.Err, to.Plan = errors.New("the engine exited with code 1"), cur // a drain switch restarts the previous settings
			}
			sv.switched(s, to)
			var line struct {
				Msg   string `json:"msg"`
				Width int    `json:"width"`
			}
			lines := strings.Split(strings.TrimSpace(log.String()), "\n")
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &line); err != nil {
				t.Fatalf("log %q: %v", log.String(), err)
			}
			if line.Msg != tc.want || line.Width != widthOf(to.Plan) {
				t.Errorf("last line %q width %d, want %q width %d\nlog:\n%s", line.Msg, line.Width, tc.want, widthOf(to.Plan), log.String())
			}
		})
	}
}

// The start line names a tuned entry's record where it is, beside its
// layer, as resolve does: it gave the path relative to the layer's
// directory ("records/tuned-….md"), which is nowhere from where serve runs.
func TestStartLineRecordOfATunedEntry(t *testing.T) {
	e := &policy.Entry{ID: "tuned-x", Record: "records/tuned-x.md", Origin: "/home/op/.config/speclaunch/tuned.toml:3"}
	e.Pair.Target = "aa"
	p := &plan.Plan{Resolution: width.Resolution{Width: 4, Source: width.Measured, Reason: "tuned", Entry: e}, Settings: config.Settings{Engine: config.Field[key.Engine]{Value: key.Sim}}}
	var log bytes.Buffer
	logPlan(slog.New(slog.NewTextHandler(&log, nil)), p, "starting engine", false)
	if want := "record=/home/op/.config/speclaunch/records/tuned-x.md"; !strings.Contains(log.String(), want) {
		t.Errorf("log without %s:\n%s", want, log.String())
	}
}

// The start line says its reason once: as an attribute only where the
// headline does not carry it; and a width switch's start says neither
// the reason, which the adaptive loop's or the follower's line gave just
// before it, nor the facts a serve cannot change (an adaptive switch
// logged its reason four times in 27 lines).
func TestStartLineSaysItOnce(t *testing.T) {
	facts := []string{"engine", "drafter", "drafter_from", "capability", "quant"}
	sched := schedule.Schedule{{Lo: 1, Hi: 3, Width: 5, Source: "override"}, {Lo: 4, Width: 1, Source: "override"}}
	noFrom := []string{"engine", "drafter", "capability", "quant"}
	for _, tc := range []struct {
		name      string
		r         width.Resolution
		brief     bool
		msg       string
		reason    bool // the reason attribute present
		withFacts []string
	}{
		{"a start: the reason in the headline", width.Resolution{Width: 4, Source: width.KindDefault, Reason: "per-kind default"}, false,
			"starting engine: draft width 4 (per-kind default)", false, facts},
		{"a width switch: brief", width.Resolution{Width: 3, Source: width.Adaptive, Reason: "the load has sat at 1"}, true,
			"starting engine: draft width 3", false, nil},
		{"speculation off, brief", width.Resolution{Width: 1, Source: width.Off, Reason: "the load has sat at 4+"}, true,
			"starting engine: speculation off", false, nil},
		{"the schedule's bucket, brief", width.Resolution{Source: width.Off, Reason: "schedule bucket 4+", OnReason: "operator schedule", Schedule: sched, Load: 4}, true,
			"starting engine: speculation off for 4+ requests in flight", false, nil},
		{"speculation off: no drafter_from", width.Resolution{Width: 1, Source: width.Off, Reason: "the load has sat at 4+"}, false,
			"starting engine: speculation off (the load has sat at 4+)", false, noFrom},
		{"a reason the headline leaves out", width.Resolution{Source: width.Off, Reason: "schedule bucket 4+", OnReason: "operator schedule", Schedule: sched, Load: 4}, false,
			"starting engine: speculation off for 4+ requests in flight, of the schedule width 5 at 1-3, off at 4+ (operator schedule)", true, noFrom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &plan.Plan{Resolution: tc.r, Settings: config.Settings{Engine: config.Field[key.Engine]{Value: key.Sim}}}
			p.Facts.Drafter, p.Facts.DrafterFrom, p.Facts.CapabilityStr, p.Facts.Quant = "draft", "/m/d.gguf", "9.0", "q8_0"
			var log bytes.Buffer
			logPlan(slog.New(slog.NewJSONHandler(&log, nil)), p, "starting engine", tc.brief)
			var line map[string]any
			if err := json.Unmarshal(log.Bytes(), &line); err != nil {
				t.Fatalf("log %q: %v", log.String(), err)
			}
			if line["msg"] != tc.msg {
				t.Errorf("msg %q, want %q", line["msg"], tc.msg)
			}
			if _, ok := line["reason"]; ok != tc.reason {
				t.Errorf("reason attribute present %v, want %v: %s", ok, tc.reason, log.String())
			}
			for _, k := range facts {
				if _, ok := line[k]; ok != slices.Contains(tc.withFacts, k) {
					t.Errorf("%s present %v, want %v: %s", k, ok, !ok, log.String())
				}
			}
			if _, ok := line["cmd"]; !ok {
				t.Errorf("no cmd: %s", log.String())
			}
		})
	}
}

// A width switch's start is brief only where the facts of the plan in
// force hold: a switch builds on the files on disk, so an edited drafter
// can start with it before the watcher's reload.
func TestBriefStart(t *testing.T) {
	mk := func(drafter string) *plan.Plan {
		p := &plan.Plan{Settings: config.Settings{Engine: config.Field[key.Engine]{Value: key.LlamaCpp}}}
		p.Facts.Drafter, p.Facts.DrafterFrom, p.Facts.CapabilityStr, p.Facts.Quant = "draft", drafter, "9.0", "q8_0"
		return p
	}
	cur := mk("/m/d.gguf")
	for _, tc := range []struct {
		name string
		kind server.Kind
		cur  *plan.Plan
		p    *plan.Plan
		want bool
	}{
		{"adaptive, the same facts", server.KindAdapt, cur, mk("/m/d.gguf"), true},
		{"the schedule's, the same facts", server.KindFollow, cur, mk("/m/d.gguf"), true},
		{"adaptive, an edited drafter", server.KindAdapt, cur, mk("/m/d2.gguf"), false},
		{"a reload", server.KindReload, cur, mk("/m/d.gguf"), false},
		{"the first start", server.KindStart, nil, mk("/m/d.gguf"), false},
		{"a restart", server.KindRestart, cur, mk("/m/d.gguf"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := briefStart(tc.kind, tc.cur, tc.p); got != tc.want {
				t.Errorf("briefStart = %v, want %v", got, tc.want)
			}
		})
	}
}
