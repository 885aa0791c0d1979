package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"
)

// A liveness check that fails for want of this process's descriptors is no
// sign of the engine's health: a connection flood had the engine killed as
// hung.
func TestLocalFailure(t *testing.T) {
	dial := func(e error) error {
		return &url.Error{Op: "Get", URL: "http://127.0.0.1:1/health", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", e)}}
	}
	cases := []struct {
		err  error
		want bool
	}{
		{dial(syscall.EMFILE), true},
		{dial(syscall.ENFILE), true},
		{dial(syscall.ENOBUFS), true},
		{fmt.Errorf("wrapped: %w", dial(syscall.EMFILE)), true},
		{dial(syscall.ECONNREFUSED), false},
		{dial(syscall.ECONNRESET), false},
		{&url.Error{Op: "Get", Err: context.DeadlineExceeded}, false},
		{errors.New("EOF"), false},
	}
	for _, c := range cases {
		if got := localFailure(c.err); got != c.want {
			t.Errorf("localFailure(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
