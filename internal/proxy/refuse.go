package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// answerWait bounds how long a failed write to an engine waits for the
// connection to end before its failure is reported (answerFirst). The
// reading side ends within microseconds of a reset; the bound only keeps
// a connection that would not end from holding the request.
const answerWait = 3 * time.Second

// answerFirst is one connection to an engine. An engine that refuses a
// request body (one over its size limit: the sim's and llama-server's
// 400 or 413) answers before reading the body to its end and closes the
// connection on the rest, and the kernel resets it: the proxy's write of
// the body still being sent fails as the answer arrives. net/http's
// transport takes whichever reaches it first, and the write's failure
// threw the answer away (a 502 "connection reset by peer" for a body the
// engine had answered). So a failed write is reported only once the
// connection is closed (the transport's reader closes it once it has
// handed over the answer, or the failure to read one), at most answerWait
// later: the answer, when there is one, comes first.
type answerFirst struct {
	net.Conn
	closed chan struct{}
	once   sync.Once
}

func newAnswerFirst(c net.Conn) *answerFirst {
	return &answerFirst{Conn: c, closed: make(chan struct{})}
}

// dialAnswerFirst dials with dial and wraps the connection (answerFirst).
func dialAnswerFirst(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err // as dialed: the retry reads a refusal from it (netfail)
		}
		return newAnswerFirst(c), nil
	}
}

func (c *answerFirst) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		t := time.NewTimer(answerWait)
		defer t.Stop()
		select {
		case <-c.closed:
		case <-t.C:
		}
	}
	return n, err
}

func (c *answerFirst) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// bodyCut reports that err ended a request whose body was still streaming
// through to the engine when the engine closed the connection (a reset, a
// broken pipe, an end; or the transport's own close of it once its reader
// met that end first, which the body's next write then meets): most
// likely it refused a body that large, which is not the engine failing.
func bodyCut(ctx context.Context, err error) bool {
	if !bodyLeft(ctx) {
		return false
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// bodySize is a body's length for a message: "" when unknown.
func bodySize(n int64) string {
	if n < 0 {
		return ""
	}
	return ", " + strconv.FormatInt(n, 10) + " bytes"
}
