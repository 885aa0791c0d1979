// Package netfail is the one rule by which a failed connection to an
// engine is judged: speclaunch's own want of resources, the engine's
// refusal, or anything else. The liveness check (internal/server) and the
// front proxy (internal/proxy) both judge by it, so that a connection
// flood that exhausts speclaunch's descriptors is held against neither
// the engine's health nor its routing.
package netfail

import (
	"errors"
	"net"
	"syscall"
)

// Cause is what a failed connection says about the engine.
type Cause int

const (
	// Other: nothing sure either way (a timeout, a reset, an EOF).
	Other Cause = iota
	// Local: this process could not connect for want of its own
	// resources; no sign of the engine's health.
	Local
	// Refused: the dial was refused, the engine's socket is gone; nothing
	// of the request was sent.
	Refused
)

// localErrnos fail on this side: descriptors (EMFILE per process, ENFILE
// system-wide), socket buffers and memory, and ephemeral ports
// (EADDRNOTAVAIL: no local port left to dial from). The load review of
// 088c135 met EMFILE under ulimit -n 44 with 16 streaming clients.
var localErrnos = []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.EADDRNOTAVAIL}

// Of judges err, a failed request or dial (wrapped in any way).
func Of(err error) Cause {
	for _, e := range localErrnos {
		if errors.Is(err, e) {
			return Local
		}
	}
	// ECONNREFUSED comes only from connect; the dial check keeps a
	// refusal from something else (a proxy's answer) out.
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" && errors.Is(err, syscall.ECONNREFUSED) {
		return Refused
	}
	return Other
}
