package serve

import (
	"errors"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/width"
)

// A switch's record keeps took_ms the switch alone, from its start (the
// follower prices its switches by it: TestLastSwitch), and the wait behind
// a switch under way apart, as waited_ms. Before, a reload that waited
// 3 s behind a switch said only the switch's own time.
func TestSwitchRecordOf(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	from := &server.Engine{Plan: &plan.Plan{Resolution: width.Resolution{Width: 4, Source: width.Override}}}
	reload := &server.Job{Kind: server.KindReload, Mode: key.SwitchOverlap, Reason: "reload: p.toml (write)"}
	cases := []struct {
		name string
		s    server.Switched
		want switchRecord
	}{
		{"at once", server.Switched{Job: reload, From: from, OK: true, Took: 1100 * time.Millisecond},
			switchRecord{Kind: "reload", Reason: reload.Reason, Mode: "overlap", At: now.Add(-1100 * time.Millisecond), FromWidth: 4, OK: true, StartMS: 1100}},
		{"behind a switch under way", server.Switched{Job: reload, From: from, OK: true, Took: 1100 * time.Millisecond, Waited: 3 * time.Second},
			switchRecord{Kind: "reload", Reason: reload.Reason, Mode: "overlap", At: now.Add(-1100 * time.Millisecond), FromWidth: 4, OK: true, StartMS: 1100, WaitedMS: 3000}},
		{"drain, failed", server.Switched{Job: reload, OK: false, Err: errors.New("no binary"), Took: 2 * time.Second, Drain: 500 * time.Millisecond},
			switchRecord{Kind: "reload", Reason: reload.Reason, Mode: "overlap", At: now.Add(-2 * time.Second), Error: "no binary", StartMS: 2000, DrainMS: 500}},
	}
	for _, c := range cases {
		if got := switchRecordOf(c.s, now); got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}
