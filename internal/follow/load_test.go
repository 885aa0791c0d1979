package follow

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A decision gives its load once, to a tenth, and its reason says that
// figure: the shell logs d.Load beside d.Reason, and the status page shows
// it. A mean of 0.95 (two idle samples in the window) was "load 0.9" in
// the reason (%.1f) and load=1 in the log's attribute (another rounding).
func TestDecisionLoadIsTheFigureItsReasonSays(t *testing.T) {
	cfg := Config{Schedule: demo(t)}
	// One request in flight but at every 20th sample: 38 of the 40 a
	// window holds, a mean of 0.95.
	load := func(at time.Duration) int {
		if at/Tick%20 == 0 {
			return 0
		}
		return 1
	}
	r := drive(cfg, New(cfg, 4, time.Second), 2*time.Minute, time.Second, load)
	if len(r.switches) == 0 {
		t.Fatal("no switch to the bucket the load sits in")
	}
	d := r.switches[0]
	if d.Load != 1 {
		t.Errorf("load %v, want the mean 0.95 rounded once to a tenth: 1", d.Load)
	}
	if want := fmt.Sprintf("(mean %.1f)", d.Load); !strings.HasPrefix(d.Reason, "the load has sat at 1 request in flight for ") || !strings.Contains(d.Reason, want) {
		t.Errorf("reason %q, want it to give the decision's load: %q…", d.Reason, want)
	}
}

// An idle server's load falls in the first bucket: the switch says "or
// none", where it read "sat at 1 request in flight for 10s (mean 0.0)".
func TestIdleLoadSaysOrNone(t *testing.T) {
	cfg := Config{Schedule: demo(t)}
	r := drive(cfg, New(cfg, 4, time.Second), 2*time.Minute, time.Second, func(time.Duration) int { return 0 })
	if len(r.switches) == 0 {
		t.Fatal("no switch to the first bucket")
	}
	if d := r.switches[0]; !strings.HasPrefix(d.Reason, "the load has sat at 1 request in flight or none for ") || !strings.Contains(d.Reason, "(mean 0.0)") {
		t.Errorf("reason %q, want the idle load said as such", d.Reason)
	}
}
