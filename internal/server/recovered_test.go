package server

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

// A death the runtime recovered from (a crash or a hang restarted, the
// serving engine killed while a switch's new engine started) is not the
// launcher's exit code once a replacement serves: a later stop exits 0
// (serve makes a cut 4), as after any stop. Before, every later stop
// exited with the dead engine's 137, and a cut's 4 and its last line were
// lost. A replacement that dies in turn, not restarted, still exits with
// its own code.
func TestRecoveredDeathIsNotTheExitCode(t *testing.T) {
	restart := limits
	restart.Restart = true
	// toBackoff waits out the restart's back-off.
	toBackoff := func(f *fake) {
		f.t.Helper()
		f.wantAfter(f.m.Deadline().Sub(f.now), Tick{}, "Start(2 restart)")
		f.want(Ready{ID: 2}, "Route(2) Switched(ok=true) Reply(<nil>)")
	}
	for _, rc := range []struct {
		name    string
		l       Limits
		recover func(f *fake) // ends with a replacement serving
	}{
		{"crash, restarted", restart, func(f *fake) {
			f.want(Exited{ID: 1, Code: 137, Elsewhere: "signal 9 (killed), which speclaunch did not send"}, "Hold Gone(1)")
			toBackoff(f)
		}},
		{"crash, restarted, then a profile edit's switch", restart, func(f *fake) {
			f.want(Exited{ID: 1, Code: 137, Elsewhere: "signal 9 (killed), which speclaunch did not send"}, "Hold Gone(1)")
			toBackoff(f)
			f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "3"))}, "Start(3 reload)")
			f.want(Ready{ID: 3}, "Route(3) Watch(2) Switched(ok=true from=2) Reply(<nil>)")
			f.want(Drained{ID: 2}, "Stop(2)")
			f.want(Exited{ID: 2, Code: 0}, "")
		}},
		{"hung, killed, restarted", restart, func(f *fake) {
			f.want(Hung{ID: 1}, "Gone(1) Stop(1 kill)")
			f.want(Exited{ID: 1, Code: 137}, "Hold Gone(1)")
			toBackoff(f)
		}},
		{"serving engine killed during an overlap switch, no restart", limits, func(f *fake) {
			f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "3"))}, "Start(2 reload)")
			f.want(Exited{ID: 1, Code: 137, Elsewhere: "signal 9 (killed), which speclaunch did not send"}, "Hold Gone(1)")
			f.want(Ready{ID: 2}, "Route(2) Switched(ok=true) Reply(<nil>)")
		}},
	} {
		for _, st := range []struct {
			name string
			stop func(f *fake, id EngineID)
		}{
			{"SIGTERM", func(f *fake, id EngineID) {
				f.want(Signal{Sig: syscall.SIGTERM}, "Refuse Watch("+itoa(id)+")")
				f.want(Drained{ID: id}, "Stop("+itoa(id)+" SIGTERM)")
				f.want(Exited{ID: id, Code: 0}, "Exit(0)")
			}},
			{"SIGINT", func(f *fake, id EngineID) {
				f.want(Signal{Sig: os.Interrupt}, "Refuse Watch("+itoa(id)+")")
				f.want(Drained{ID: id}, "Stop("+itoa(id)+" SIGINT)")
				f.want(Exited{ID: id, Code: 0}, "Exit(0)")
			}},
			{"SIGTERM, requests cut at the shutdown timeout", func(f *fake, id EngineID) {
				f.want(Signal{Sig: syscall.SIGTERM}, "Refuse Watch("+itoa(id)+")")
				// Exit(0) with a Cut: serve's cutExit makes it 4 and says
				// how many requests were cut.
				f.wantAfter(f.m.Limits.ShutdownTimeout, Tick{}, "Cut Stop("+itoa(id)+" SIGTERM)")
				f.want(Exited{ID: id, Code: 143}, "Exit(0)")
			}},
			{"the replacement dies too, not restarted", func(f *fake, id EngineID) {
				// A profile edit turns the restart policy off; the
				// engine command is the same, so it is adopted.
				f.want(Submit{Job: &Job{Kind: KindReload, Mode: key.SwitchOverlap, Plan: f.m.Plan, Limits: limits}}, "Adopt Reply(<nil>)")
				f.want(Exited{ID: id, Code: 139}, "Hold Gone("+itoa(id)+" last) Refuse Cut Exit(139)")
			}},
		} {
			t.Run(rc.name+"; "+st.name, func(t *testing.T) {
				f := serving(t, rc.l)
				rc.recover(f)
				if f.m.Phase != Serving || f.m.Serving == nil {
					t.Fatalf("after the recovery: phase %s, serving %v", f.m.Phase, f.m.Serving)
				}
				st.stop(f, f.m.Serving.ID)
			})
		}
	}
}

func itoa(id EngineID) string { return fmt.Sprint(uint64(id)) }
