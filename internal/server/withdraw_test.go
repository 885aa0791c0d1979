package server

import (
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

// Runtime.Withdraw says whether the loop dropped a waiting job: the
// Withdraw event's answer comes back through the Withdrawn action, and
// once the runtime has ended, nothing waits and the call does not hang.
func TestRuntimeWithdrawAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		waiting bool // a reload waits for the switch under way
		ended   bool // Run has returned
		want    bool
	}{
		{"a reload waits", true, false, true},
		{"none waits", false, false, false},
		{"the runtime ended", true, true, false},
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
			got := make(chan bool, 1)
			go func() { got <- rt.Withdraw(KindReload) }()
			if !tc.ended {
				// The loop's part (Run): the event, one step, its actions.
				var acts []Action
				f.m, acts = Step(f.m, <-rt.events, f.now)
				rt.exec(acts)
			}
			if g := <-got; g != tc.want {
				t.Errorf("Withdraw = %v, want %v", g, tc.want)
			}
		})
	}
}
