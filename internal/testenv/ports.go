package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/speclaunch/speclaunch/internal/defaults"
)

// PortBlock returns the first of n consecutive ports free on every
// interface, below Linux's ephemeral range (32768 up). A port the kernel
// hands out for port 0 is in that range, and once its probe closes it can
// meet the source port of another test's outgoing connection or the
// loopback port of another test's engine before the server binds it: the
// end-to-end tier then failed now and then with "address already in use"
// (TestServeHostMovesOnOnePort, 2 runs in 40 beside two other serve
// tests). Ports below the range are never handed out that way. They lie
// below bench's arm ports too (defaults.BenchArmPortLo up): a test's probe
// of a port there held, for an instant, the port a bench arm under test
// had drawn, and the arm failed (bench.txtar in a CI run, port 20121).
func PortBlock(t testing.TB, n int) int {
	t.Helper()
	for range 200 {
		base := testPortLo + rand.IntN(defaults.BenchArmPortLo-testPortLo-n)
		ok := true
		for p := base; p < base+n && ok; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
			if err != nil {
				ok = false
				continue
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatalf("no block of %d free ports in %d-%d", n, testPortLo, defaults.BenchArmPortLo-1)
	return 0
}

// testPortLo is the lowest port a test draws: above the ports of the
// services a host commonly runs (up to 9999).
const testPortLo = 10000

// Port returns a port free on every interface, below the ephemeral range
// (PortBlock says why).
func Port(t testing.TB) int {
	t.Helper()
	return PortBlock(t, 1)
}
