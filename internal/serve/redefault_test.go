package serve

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/control"
	"github.com/speclaunch/speclaunch/internal/follow"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/width"
)

type fakeRuntime struct{ inFlight int }

func (f fakeRuntime) SwitchWidth(context.Context, int, string) (time.Duration, error) {
	return 0, nil
}
func (f fakeRuntime) Generating() int { return f.inFlight }
func (f fakeRuntime) Load() int       { return f.inFlight }
func (f fakeRuntime) Busy() string    { return "" }

// defaultPlan is a plan whose precedence resolved width w (the engine's
// default for its kind), its engine command naming w.
func defaultPlan(w int) *plan.Plan {
	return &plan.Plan{Resolution: width.Resolution{Width: w, Source: width.KindDefault, Schedule: schedule.Flat(w, string(width.KindDefault))},
		Resolved: schedule.Flat(w, string(width.KindDefault)), Launch: engine.Launch{Argv: []string{"sim", "--draft-max", strings.Repeat("x", w)}}}
}

// One capability edit, one switch: the reload switched the engine to the
// default the new capability resolves (width 5 → 16) before the
// controller had chosen a width; the controller takes 16 as its safe
// answer, said once, and does not switch back to 5 (it did, 11 s later).
// While the switch is routed but not yet taken in, the serving engine's
// own plan says the default.
func TestReloadedDefaultIsTheSafeAnswer(t *testing.T) {
	p5, p16 := defaultPlan(5), defaultPlan(16)
	eng := &fakeEngines{cur: &server.Instance{ID: 1, Plan: p5}}
	inForce := p5
	var log bytes.Buffer
	sh := &controlShell{c: control.New(control.Config{Default: defaultOf(p5), SwitchS: 1}), rt: fakeRuntime{inFlight: 2}, eng: eng,
		log: slog.New(slog.NewTextHandler(&log, nil)), inForce: func() *plan.Plan { return inForce }}
	s := sh.c.Init(control.Pair{})
	now := time.Unix(1_800_000_000, 0)
	var switched []control.Action
	feed := func(d time.Duration) {
		for end := now.Add(d); now.Before(end); now = now.Add(follow.Tick) {
			var acts []control.Action
			s, acts = sh.step(s, sh.sample(now))
			for _, a := range acts {
				if a.Op == control.SwitchTo {
					switched = append(switched, a)
				}
			}
		}
	}
	feed(30 * time.Second)
	eng.cur = &server.Instance{ID: 2, Plan: p16} // the reload's switch: routed
	feed(time.Second)
	inForce = p16 // and taken in
	feed(3 * time.Minute)
	if len(switched) > 0 {
		t.Errorf("the controller switched after the reload's switch to the new default: %+v", switched)
	}
	if got := sh.c.Config().Default.String(); got != "1+:16" {
		t.Errorf("the controller's safe answer is %s, want 1+:16", got)
	}
	if n := strings.Count(log.String(), "adapt: the settings now resolve width 16, the safe answer from now on (was width 5)"); n != 1 {
		t.Errorf("the new safe answer is said %d times, want once:\n%s", n, log.String())
	}
}
