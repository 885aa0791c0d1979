// Package testenv holds what the two test tiers share. `go test ./...` is
// tier 1: fast and deterministic (table tests, golden files, fake clocks,
// virtual-time sims). Tests that start real processes and need real time
// (serve under load, switches, signals, hangs, the adaptive loop on a live
// sim) are tier 2, the end-to-end tier, run with SPECLAUNCH_E2E=1.
package testenv

import (
	"os"
	"testing"
)

// Var is the environment variable that turns the end-to-end tier on.
const Var = "SPECLAUNCH_E2E"

// Command runs both tiers; .ci/run runs it, and it is the README's.
const Command = Var + "=1 go test ./..."

// Enabled reports whether the end-to-end tier runs (SPECLAUNCH_E2E=1).
func Enabled() bool { return os.Getenv(Var) == "1" }

// E2E skips t unless the end-to-end tier runs, saying how to run it.
func E2E(t testing.TB) {
	t.Helper()
	if !Enabled() {
		t.Skip("end-to-end tier (real processes, real time): run it with " + Command)
	}
}
