package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/supervise"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

// startingLauncher starts a process and waits for the interrupt, as a
// model loads; then it stops the process and returns it with the error
// (ready false), or returns it ready, as a load that ended just as the
// stop came.
type startingLauncher struct {
	t       *testing.T
	ready   bool
	started chan *supervise.Process
}

func (f *startingLauncher) Launch(_ context.Context, _ *plan.Plan, id EngineID, _ Kind, interrupt context.Context) (*Instance, error) {
	proc, err := supervise.Start(context.Background(), supervise.Spec{Argv: []string{"sleep", "60"}})
	if err != nil {
		f.t.Error(err)
		return nil, err
	}
	f.started <- proc
	<-interrupt.Done()
	if f.ready {
		return &Instance{ID: id, Proc: proc}, nil
	}
	proc.Stop(time.Minute)
	return &Instance{Proc: proc}, errors.New("interrupted: it was starting; it was stopped")
}

func (*startingLauncher) BeforeTraffic(context.Context, *Instance) error { return nil }
func (*startingLauncher) Notify(Note)                                    {}

// An engine stopped while it starts (a signal 0.7 s after serve began, a
// switch given up) is said on the "engine stopped" line with its exit
// code, as one stopped while it serves is (docs/serving.md). Before, no
// line gave it. Tier 2: a process.
func TestStoppedWhileStartingSaysItsCode(t *testing.T) {
	testenv.E2E(t)
	t.Parallel()
	for _, ready := range []bool{false, true} {
		t.Run(fmt.Sprintf("ready=%v", ready), func(t *testing.T) {
			buf := &lockedBuf{}
			f := &startingLauncher{t: t, ready: ready, started: make(chan *supervise.Process, 1)}
			rt := New(Options{Log: slog.New(slog.NewTextHandler(buf, nil)), Launcher: f})
			rt.start(Start{Engine: &Engine{ID: 1, Limits: Limits{StopTimeout: time.Minute}}, Kind: KindStart})
			proc := <-f.started
			defer proc.Stop(time.Second)
			rt.stop(Stop{ID: 1, Why: WhyStopping})
			if ev := (<-rt.events).(Ready); ev.Err == nil {
				t.Errorf("Ready %#v, want the start's failure", ev)
			}
			<-rt.events // Exited
			want := fmt.Sprintf(`msg="engine stopped" pid=%d exit_code=143`, proc.PID())
			if !strings.Contains(buf.String(), want) {
				t.Errorf("log:\n%s\nwant %s (SIGTERM's code)", buf.String(), want)
			}
		})
	}
}
