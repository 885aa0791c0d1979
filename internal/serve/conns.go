package serve

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// Bounds on what clients hold open at the public address. A flood of
// 24,000 held connections exhausted speclaunch's 20,000 descriptors: its
// liveness check could no longer dial the engine, which was killed as
// hung, and serve exited. 1,000 connections each trickling a 1 MB header
// took RSS from 24 MB to 1.9 GB.
const (
	// maxConns: client connections open at once, past which a new one
	// gets 503 and is closed. It bounds what connections may hold:
	// 4096 × (maxHeaderBytes + 4 KiB, and Go's buffers and goroutine,
	// about 20 KiB) is about 230 MiB at most; and it is four times the
	// default hold queue (server.queue_size 1024, one connection a held
	// request), leaving room for the requests the engines serve.
	maxConns = 4096
	// connFDReserve: descriptors kept for all else when the limit is
	// below maxConns' needs (each proxied request holds two, the client's
	// and the engine's). Besides requests serve holds a few dozen: two
	// engines' pipes during a switch, the watcher, probe, scrape and
	// liveness connections, the log; 256 leaves several times that.
	connFDReserve = 256
	// minConns: the cap under a tiny limit, so that a few clients are
	// still served (the reserve shrinks below 288 descriptors).
	minConns = 16
	// maxHeaderBytes: a request's header block (Go adds 4 KiB to it);
	// 32 KiB is nginx's default total for large client headers.
	maxHeaderBytes = 32 << 10
)

// capFor is the connection cap under a descriptor limit of nofile.
func capFor(nofile int) int {
	return min(maxConns, max((nofile-connFDReserve)/2, minConns))
}

// slots counts the client connections open across every public listener
// serve has had (a rebind's old listener finishes its connections).
type slots struct{ ch chan struct{} }

func newSlots(n int) *slots { return &slots{ch: make(chan struct{}, n)} }

// cappedListener hands out a connection while a slot is free; past the
// cap it answers 503 at once and closes the connection, so that a client
// that holds connections open costs the server a bounded number.
type cappedListener struct {
	net.Listener
	s *slots
}

// shedReply is what a connection past the cap reads.
var shedReply = func() []byte {
	body := `{"error":{"code":503,"message":"too many open connections to this server; retry in a second"}}` + "\n"
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

func (l *cappedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.s.ch <- struct{}{}:
			return &slotConn{Conn: c, s: l.s}, nil
		default:
			// The write goes to a fresh socket's empty buffer; the
			// deadline keeps a client that never reads from holding
			// the accept loop.
			c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
			c.Write(shedReply)
			c.Close()
		}
	}
}

// slotConn gives its slot back once, when closed.
type slotConn struct {
	net.Conn
	s    *slots
	once sync.Once
}

func (c *slotConn) Close() error {
	c.once.Do(func() { <-c.s.ch })
	return c.Conn.Close()
}

// CloseWrite passes the half-close through: net/http sends a FIN with it
// before closing a connection it answered early (431, 408), so the client
// sees the end at once and the slot is not held through the server's
// wait for a reset to be avoided.
func (c *slotConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
