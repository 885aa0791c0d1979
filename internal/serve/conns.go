package serve

import (
	"container/list"
	"fmt"
	"net"
	"net/http"
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
// serve has had (a rebind's old listener finishes its connections), and
// keeps those waiting for a request in the order they began to wait.
type slots struct {
	ch chan struct{}

	mu   sync.Mutex
	idle list.List // of *slotConn: accepted or kept alive, no request in yet
}

func newSlots(n int) *slots { return &slots{ch: make(chan struct{}, n)} }

// take holds a slot for a new connection. At the cap it closes the
// connection that has waited longest for a request, as nginx reuses its
// idle keep-alive connections when worker_connections run out: otherwise
// clients that connect and send nothing, or keep connections alive and
// idle, would hold every slot until their timeouts (ReadHeaderTimeout,
// IdleTimeout), and every new request, /health included, would read 503.
// Only a cap full of requests in progress sheds.
func (s *slots) take() bool {
	for range 2 {
		select {
		case s.ch <- struct{}{}:
			return true
		default:
		}
		if !s.reclaim() {
			return false
		}
	}
	return false
}

// reclaim closes the connection that has waited longest for a request. A
// request whose header completes in the instant between the choice and
// the close is lost with it, as with nginx's reuse of idle keep-alive
// connections; the longest waiter is the least likely to be sending.
func (s *slots) reclaim() bool {
	s.mu.Lock()
	e := s.idle.Front()
	if e != nil {
		s.unlist(e.Value.(*slotConn))
	}
	s.mu.Unlock()
	if e == nil {
		return false
	}
	e.Value.(*slotConn).Close()
	return true
}

// connState is the public servers' http.Server.ConnState: a connection
// joins the waiting list when accepted (StateNew) or kept alive after a
// reply (StateIdle), at the back; it leaves it once a request's header is
// in (StateActive) or it is gone.
func (s *slots) connState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*slotConn)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unlist(c)
	if (st == http.StateNew || st == http.StateIdle) && !c.closed {
		c.waiting = s.idle.PushBack(c)
	}
}

// unlist takes c off the waiting list; s.mu is held.
func (s *slots) unlist(c *slotConn) {
	if c.waiting != nil {
		s.idle.Remove(c.waiting)
		c.waiting = nil
	}
}

// cappedListener hands out a connection while a slot is free or one can be
// reclaimed (slots.take); past that it answers 503 at once and closes the
// connection, so that clients holding connections cost the server a
// bounded number.
type cappedListener struct {
	net.Listener
	s *slots
}

// shedReply is what a connection past the cap reads.
var shedReply = func() []byte {
	body := `{"error":{"code":503,"message":"too many open connections to this server; retry in a second","type":"unavailable_error"}}` + "\n"
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

func (l *cappedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.s.take() {
			return &slotConn{Conn: c, s: l.s}, nil
		}
		// The write goes to a fresh socket's empty buffer; the deadline
		// keeps a client that never reads from holding the accept loop.
		c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		c.Write(shedReply)
		c.Close()
	}
}

// slotConn gives its slot back once, when closed.
type slotConn struct {
	net.Conn
	s    *slots
	once sync.Once

	// Under s.mu: its place on the waiting list, and whether it was
	// closed (a closed one never joins the list again).
	waiting *list.Element
	closed  bool
}

func (c *slotConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		c.closed = true
		c.s.unlist(c)
		c.s.mu.Unlock()
		<-c.s.ch
	})
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
