// Package testenv holds what the two test tiers share. `go test ./...` is
// tier 1: fast and deterministic (table tests, golden files, fake clocks,
// virtual-time sims). Tests that start real processes and need real time
// (serve under load, switches, signals, hangs, the adaptive loop on a live
// sim) are tier 2, the end-to-end tier, run with SPECLAUNCH_E2E=1.
package testenv

import (
	"os"
	"testing"
	"time"
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

// WaitFor polls cond until it holds, and fails t after 5 s: a test that
// waits on goroutines it started (a request held in the proxy) fails
// instead of hanging its package when the code under test is broken. It
// judges no time: the bound only ends a wait that would never end.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Returns runs f and fails t if it has not returned within 10 s: a test
// of code that must not block (a FIFO opened for a read) fails instead of
// hanging its package. It judges no time: the bound only ends a wait that
// would never end.
func Returns(t testing.TB, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still blocked after 10s", what)
	}
}
