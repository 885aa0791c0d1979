package netfail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
)

// A failed connection is held against the engine only when the engine
// refused it: the load review of 088c135 met a dial that failed for want
// of speclaunch's descriptors (EMFILE) marking a live engine dead for
// good, and before it a liveness check failing the same way had a healthy
// engine killed as hung.
func TestOf(t *testing.T) {
	dial := func(call string, e error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError(call, e)}
	}
	get := func(e error) error { return &url.Error{Op: "Get", URL: "http://127.0.0.1:1/health", Err: e} }
	cases := []struct {
		name string
		err  error
		want Cause
	}{
		{"emfile", dial("socket", syscall.EMFILE), Local},
		{"enfile", dial("socket", syscall.ENFILE), Local},
		{"enobufs", dial("socket", syscall.ENOBUFS), Local},
		{"enomem", dial("socket", syscall.ENOMEM), Local},
		{"no local port", dial("connect", syscall.EADDRNOTAVAIL), Local},
		{"emfile through a client", get(dial("socket", syscall.EMFILE)), Local},
		{"emfile wrapped", fmt.Errorf("wrapped: %w", get(dial("socket", syscall.EMFILE))), Local},
		{"enobufs on write", &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ENOBUFS)}, Local},
		{"refused", dial("connect", syscall.ECONNREFUSED), Refused},
		{"refused through a client", get(dial("connect", syscall.ECONNREFUSED)), Refused},
		{"refused, not dialing", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNREFUSED)}, Other},
		{"dial timeout", dial("connect", os.ErrDeadlineExceeded), Other},
		{"dial reset", dial("connect", syscall.ECONNRESET), Other},
		{"unreachable", dial("connect", syscall.ENETUNREACH), Other},
		{"client timeout", get(context.DeadlineExceeded), Other},
		{"read reset", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, Other},
		{"eof", io.EOF, Other},
		{"plain", errors.New("EOF"), Other},
		{"nil", nil, Other},
	}
	for _, c := range cases {
		if got := Of(c.err); got != c.want {
			t.Errorf("%s: Of(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
