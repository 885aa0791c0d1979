package server

import (
	"slices"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

// Runtime.Withdraw reports the waiting job the loop dropped and the one
// under way (the launcher gives back the address bound ahead for the
// dropped one): the Withdraw event's answer comes back through the
// Withdrawn action, and once the runtime has ended, nothing waits and the
// call does not hang.
func TestRuntimeWithdrawAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		waiting bool   // a reload waits for the switch under way
		ended   bool   // Run has returned
		want    string // the dropped job's plan's width, then the one under way's; "" none
	}{
		{"a reload waits", true, false, "2 3"},
		{"none waits", false, false, " 3"},
		{"the runtime ended", true, true, " "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := New(Options{})
			f := serving(t, limits)
			f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "3"))}, "Start(2 reload)")
			if tc.waiting {
				f.want(Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "2"))}, "")
			}
			if tc.ended {
				close(rt.ended)
			}
			got := make(chan Withdrawal, 1)
			go func() { got <- rt.Withdraw(KindReload) }()
			if !tc.ended {
				// The loop's part (Run): the event, one step, its actions.
				var acts []Action
				f.m, acts = Step(f.m, <-rt.events, f.now)
				rt.exec(acts)
			}
			w := <-got
			if g := widthArg(w.Job) + " " + widthArg(w.UnderWay); g != tc.want {
				t.Errorf("Withdraw dropped and found under way %q, want %q", g, tc.want)
			}
		})
	}
}

// widthArg is the --w value of j's plan (planOf), "" for no job.
func widthArg(j *Job) string {
	if j == nil {
		return ""
	}
	argv := j.Plan.Launch.Argv
	if i := slices.Index(argv, "--w"); i >= 0 && i+1 < len(argv) {
		return argv[i+1]
	}
	return "?"
}
