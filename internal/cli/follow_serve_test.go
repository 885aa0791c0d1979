package cli

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/loadgen"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

// serve follows a width schedule on the sim: three clients sit in the
// 2+ bucket until the switch repays itself, and serve moves to its width
// through the proxy with no request failed, logging the load that caused
// it; the status page shows the bucket in force. The load goes on until
// the new engine has answered two requests per client, then stops (when
// the switch repays itself is the rule's, judged on virtual time in
// internal/follow).
func TestServeFollowsSchedule(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // see TestMain
	r, _, _, port := serveSim(t, "", "--draft-schedule", "1:4,2+:2")
	r.log.waitFor(t, `following the width schedule`, 1, 10*time.Second)
	const clients = 3
	switched, stop := make(chan struct{}), make(chan struct{})
	var after atomic.Int64
	type outcome struct {
		res loadgen.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := loadgen.Run(context.Background(), loadgen.Options{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Clients: clients, Duration: 60 * time.Second, Stream: true, MaxTokens: 64,
			Stop: stop, OnDone: func(loadgen.Sample) {
				select {
				case <-switched:
					if after.Add(1) == 2*clients {
						close(stop)
					}
				default:
				}
			}})
		done <- outcome{res, err}
	}()
	r.log.waitFor(t, `switched to_pid=\d+ width=2`, 1, 60*time.Second)
	close(switched)
	o := <-done
	if o.err != nil || o.res.Bad() > 0 {
		t.Fatalf("load: %v, %v", o.err, o.res)
	}
	if n := after.Load(); n < 2*clients {
		t.Errorf("%d requests answered after the switch, want %d", n, 2*clients)
	}
	r.log.waitFor(t, `follow: switching from_width=4 to_width=2 bucket=2\+ load=[23](\.\d)?\b`, 1, time.Second)
	if n := r.log.count(`follow: switching`); n != 1 {
		t.Errorf("%d follow switches for one load change, want 1:\n%s", n, r.log)
	}
}
