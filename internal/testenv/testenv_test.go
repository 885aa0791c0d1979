package testenv

import (
	"testing"

	"github.com/speclaunch/speclaunch/internal/defaults"
)

// E2E runs a test only with SPECLAUNCH_E2E=1; any other value skips it
// (a stray "0" or "false" must not turn the slow tier on).
func TestE2E(t *testing.T) {
	for _, tc := range []struct {
		val string
		run bool
	}{{"", false}, {"0", false}, {"false", false}, {"1", true}} {
		t.Run("value="+tc.val, func(t *testing.T) {
			t.Setenv(Var, tc.val)
			ran := false
			t.Run("gated", func(t *testing.T) {
				E2E(t)
				ran = true
			})
			if ran != tc.run {
				t.Errorf("%s=%q: ran %v, want %v", Var, tc.val, ran, tc.run)
			}
		})
	}
}

// Test ports lie below bench's arm ports, so that a test's probe never
// holds a port an arm drew.
func TestPortBelowBenchArms(t *testing.T) {
	for range 20 {
		if p := Port(t); p < testPortLo || p >= defaults.BenchArmPortLo {
			t.Fatalf("port %d, want %d to %d", p, testPortLo, defaults.BenchArmPortLo-1)
		}
	}
}
