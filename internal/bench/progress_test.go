package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestProgressModes(t *testing.T) {
	clock := time.Unix(0, 0)
	drive := func(o Options) string {
		var b bytes.Buffer
		o.Progress, o.Rounds = &b, 3
		p := newProgress(o)
		p.now = func() time.Time { return clock }
		p.begin(2, ScheduleRestart, 4)
		clock = clock.Add(2 * time.Second)
		p.request("width 4", 1, PhaseWarmup, 50, "")
		clock = clock.Add(2 * time.Second)
		p.request("width 4", 1, PhaseMeasured, 61.25, "")
		p.armFailed("width 6", "engine exited")
		p.finish(true, nil)
		return b.String()
	}
	plain := drive(Options{})
	if strings.Contains(plain, "\r") || !strings.Contains(plain, "round 1/3  width 4 ") || !strings.Contains(plain, "61.2 tok/s") ||
		!strings.Contains(plain, "about 4s left") || strings.Contains(plain, "warm-up") || strings.Count(plain, "\n") != 4 {
		t.Errorf("plain progress:\n%s", plain)
	}
	tty := drive(Options{IsTTY: true})
	if !strings.Contains(tty, "\rround 1/3  width 4 ") || !strings.Contains(tty, "warm-up") {
		t.Errorf("tty progress: %q", tty)
	}
	js := drive(Options{JSONProgress: true, IsTTY: true})
	for _, want := range []string{`{"event":"start","arms":2`, `{"event":"request","arm":"width 4"`, `"tok_s":61.3`, `"eta_s":4`, `"event":"arm_failed"`, `"event":"done"`} {
		if !strings.Contains(js, want) {
			t.Errorf("json progress lacks %s:\n%s", want, js)
		}
	}
	if strings.Contains(js, "\r") {
		t.Error("json progress rewrites lines")
	}
}
