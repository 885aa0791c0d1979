package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
)

// PortBlock returns the first of n consecutive ports free on every
// interface, below Linux's ephemeral range (32768 up). A port the kernel
// hands out for port 0 is in that range, and once its probe closes it can
// meet the source port of another test's outgoing connection or the
// loopback port of another test's engine before the server binds it: the
// end-to-end tier then failed now and then with "address already in use"
// (TestServeHostMovesOnOnePort, 2 runs in 40 beside two other serve
// tests). Ports below the range are never handed out that way.
func PortBlock(t testing.TB, n int) int {
	t.Helper()
	for range 200 {
		base := 20000 + rand.IntN(12000-n)
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
	t.Fatal("no block of free ports below 32768")
	return 0
}

// Port returns a port free on every interface, below the ephemeral range
// (PortBlock says why).
func Port(t testing.TB) int {
	t.Helper()
	return PortBlock(t, 1)
}
