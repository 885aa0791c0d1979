package plan

import (
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/width"
)

// A schedule's headline names a tuned entry's record where it is, beside
// the tuned layer, not relative to a directory the operator is not in.
func TestScheduleHeadlineNamesATunedRecordWhereItIs(t *testing.T) {
	s, err := schedule.FromTriples([][]int{{1, 3, 6}, {4, 0, 1}}, "measured")
	if err != nil {
		t.Fatal(err)
	}
	e := &policy.Entry{ID: "tuned-a", Pin: "sim", Record: "records/tune.md", Origin: "/home/op/.config/speclaunch/tuned.toml:11",
		Tuned: "2026-12-05", Pair: policy.Pair{Target: strings.Repeat("a", 64), Draft: strings.Repeat("b", 64), Pin: "sim"}}
	got := Headline(width.Resolution{Source: width.Measured, Reason: "tuned on this pair 2026-12-05", Entry: e, Schedule: s})
	if !strings.Contains(got, "record /home/op/.config/speclaunch/records/tune.md") {
		t.Errorf("headline %q does not name the record beside its layer", got)
	}
}

// An engine that runs one width for a schedule of several (SGLang, a vLLM
// older than 0.24) is headlined with the width it runs, the schedule's at
// one request, never the widths it will not run ("off at 1 request, width
// 4 at 2+" promised drafting SGLang never did); one that takes the
// schedule, or whose schedule serve follows, keeps the schedule's headline.
func TestHeadlineOfAOneWidthEngine(t *testing.T) {
	for _, c := range []struct {
		name   string
		engine key.Engine
		caps   engine.Caps
		sched  string
		want   string
	}{
		{"sglang, off at one", key.SGLang, engine.Caps{Version: "0.5.6"}, "1:1,2+:4", "speculation off (the schedule is off at 1 request in flight (operator schedule)); sglang runs one width at every load, the schedule's at one request in flight, not the schedule 1:1,2+:4"},
		{"sglang, 6 at one", key.SGLang, engine.Caps{Version: "0.5.6"}, "1:6,2-3:4,4+:1", "draft width 6 (operator schedule); sglang runs one width at every load, the schedule's at one request in flight, not the schedule 1:6,2-3:4,4+:1"},
		{"old vllm, off at one", key.VLLM, engine.Caps{Version: "0.20.1"}, "1:1,2+:4", "speculation off (the schedule is off at 1 request in flight (operator schedule)); vllm runs one width"},
		{"vllm 0.24", key.VLLM, engine.Caps{Version: "0.24.1"}, "1:1,2+:4", "off at 1 request, width 4 at 2+ (operator schedule)"},
		{"llama.cpp, followed by serve", key.LlamaCpp, engine.Caps{}, "1:1,2+:4", "off at 1 request, width 4 at 2+ (operator schedule)"},
	} {
		s, err := schedule.Parse(c.sched, "override")
		if err != nil {
			t.Fatal(err)
		}
		p := &Plan{Resolution: width.Resolution{Source: width.Override, Reason: "operator schedule", Schedule: s}.AtLoad(1)}
		p.Settings.Engine.Value, p.Facts.Caps = c.engine, c.caps
		if got := p.Headline(); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: headline %q, want %q", c.name, got, c.want)
		}
	}
}
