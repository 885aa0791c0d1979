package serve

import (
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/control"
	"github.com/speclaunch/speclaunch/internal/follow"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

func TestFollowWord(t *testing.T) {
	for _, c := range []struct {
		name string
		st   control.Status
		want string
	}{
		{"before the first full window", control.Status{Width: 4}, ""},
		{"the controller's word", control.Status{Width: 4, Bucket: "1", Load: 3.9, Follow: "the load is at 2-4 requests in flight (mean 3.9); width 1 waits: an engine starts"}, "the load is at 2-4 requests in flight (mean 3.9); width 1 waits: an engine starts"},
		{"the load where the width runs", control.Status{Width: 4, Bucket: "2-4", Load: 3.9}, "the load sits at 2-4 requests in flight (mean 3.9), where width 4 runs: no switch"},
		{"an idle server's", control.Status{Width: 4, Bucket: "1", Load: 0.4}, "the load sits at 1 request in flight or none (mean 0.4), where width 4 runs: no switch"},
	} {
		if got := followWord(c.st); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// Under a steady load at the width that runs, the status shows the
// follower's word once its window is full: it showed none (the decision's
// Reason is empty there, and omitted).
func TestStatusShowsFollowUnderSteadyLoad(t *testing.T) {
	c := control.New(control.Config{Default: schedule.Flat(4, "engine default")})
	s := c.Init(control.Pair{})
	now := time.Unix(1_700_000_000, 0)
	for i := 0; i <= int(2*follow.Window/follow.Tick); i++ {
		now = now.Add(follow.Tick)
		s, _ = c.Step(s, control.Observation{Kind: control.Sample, Now: now, InFlight: 1, Width: 4})
	}
	st := statusShown(s, now, "")
	if st.Bucket == "" || st.Follow == "" {
		t.Errorf("bucket %q, follow %q: want both after two windows of load 1 at width 4", st.Bucket, st.Follow)
	}
}
