package cli

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/loadgen"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

// serve follows a width schedule on the sim: three clients sit in the
// 2+ bucket until the switch repays itself, and serve moves to its width
// through the proxy with no request failed, logging the load that caused
// it; the status page shows the bucket in force.
func TestServeFollowsSchedule(t *testing.T) {
	testenv.E2E(t)
	r, _, _, port := serveSim(t, "", "--draft-schedule", "1:4,2+:2")
	r.log.waitFor(t, `following the width schedule`, 1, 10*time.Second)
	res, err := loadgen.Run(context.Background(), loadgen.Options{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Clients: 3, Duration: 40 * time.Second, Stream: true, MaxTokens: 64})
	if err != nil || res.Bad() > 0 {
		t.Fatalf("load: %v, %v", err, res)
	}
	r.log.waitFor(t, `follow: switching from_width=4 to_width=2 bucket=2\+ load=[23](\.\d)?\b`, 1, time.Second)
	r.log.waitFor(t, `switched to_pid=\d+ width=2`, 1, 5*time.Second)
	if n := r.log.count(`follow: switching`); n != 1 {
		t.Errorf("%d follow switches for one load change, want 1:\n%s", n, r.log)
	}
}
