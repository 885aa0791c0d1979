package serve

import (
	"container/list"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/speclaunch/speclaunch/internal/proxy"
)

// Bounds on what clients hold open at the public address. A flood of
// 24,000 held connections exhausted speclaunch's 20,000 descriptors: its
// liveness check could no longer dial the engine, which was killed as
// hung, and serve exited. 1,000 connections each trickling a 1 MB header
// took RSS from 24 MB to 1.9 GB.
const (
	// maxConns: client connections open at once, past which a new one
	// may only ask for /health (spareConns) or gets 503 and is closed. It
	// bounds what connections may hold (maxConnsHeld); and it is four
	// times the default hold queue (server.queue_size 1024, one
	// connection a held request), leaving room for the requests the
	// engines serve.
	maxConns = 4096
	// spareConns: connections beyond the cap that may ask for /health,
	// the status page and /metrics alone (spareServes). A request in progress is never reclaimed (a body may stall
	// for the proxy's body timeout, renewed as it trickles), so a cap
	// full of stalled bodies shed every /health and a liveness probe
	// failed. Reclaiming the request whose body stalled longest instead
	// would cut a client's upload that is merely slow, and still shed
	// /health at a cap of requests held for a switch; a spare pool
	// answers /health whatever the cap holds, and costs 32 descriptors
	// (a /metrics scrape dials the engine) and under 1 MiB at most. 16: several probes at once (liveness,
	// readiness, a load balancer's) with room for a flood's churn.
	spareConns = 16
	// spareLife: how long a spare connection may live, its header and
	// answer included: the Kubernetes recipe's liveness probe gives up
	// after 5 s (deploy/kubernetes/speclaunch.yaml), and /health is
	// answered in microseconds from the runtime's state.
	spareLife = 5 * time.Second
	// connFDReserve: descriptors kept for all else when the limit is
	// below maxConns' needs (each proxied request holds two, the client's
	// and the engine's). Besides requests serve holds a few dozen: two
	// engines' pipes during a switch, the watcher, probe, scrape and
	// liveness connections, the log, spareConns (two each at most: a
	// /metrics scrape dials the engine) and lingerConns; 256 leaves
	// several times that.
	connFDReserve = 256
	// minConns: the cap under a tiny limit, so that a few clients are
	// still served (the reserve shrinks below 288 descriptors).
	minConns = 16
	// lingerConns: connections net/http answered early with the client's
	// request unread (a 431 header, a 408 or a spare's 503 with a body
	// left), held open for its wait before the close (rstAvoidanceDelay,
	// 500 ms) so that the client reads the answer before a reset. They
	// give their slot back when that wait begins (slotConn.CloseWrite):
	// the client sees the end at once and may connect again, and one
	// client doing so in a loop held all the spares through the waits,
	// so /health read 503 for as long as it ran. Past lingerConns such a
	// connection is closed at once, its answer written (the client may
	// read a reset for it), as one past the spares is: so the waits hold
	// 16 descriptors at most, not one per slot given back. net/http's
	// goroutine sleeps through the wait either way, its buffers given
	// back (4 clients looping on 431s at 4,000 a second: 25 MB more RSS).
	lingerConns = 16
	// maxAsleep bounds net/http's goroutines in that wait, descriptor or
	// not: past it the listener accepts no new connection until some
	// wake (new clients wait in the kernel's backlog, 500 ms at most), so
	// a flood's waits cost at most maxAsleep goroutine stacks
	// (asleepHeld each: 32 MiB), not one per connection it can open in
	// 500 ms.
	maxAsleep = 4096
	// asleepPoll is how often a listener held by maxAsleep looks again.
	asleepPoll = 10 * time.Millisecond
	// maxHeaderBytes: a request's header block (Go adds 4 KiB to it);
	// 32 KiB is nginx's default total for large client headers. A lower
	// cap saves little (below): 16 KiB would take maxConnsHeld from 401
	// to 273 MiB, and refuse a gateway's cookies or a long token that
	// nginx in front would pass.
	maxHeaderBytes = 32 << 10
	// headerTimeout: how long a request's header block may take to
	// arrive.
	headerTimeout = 30 * time.Second
	// connHeld is the most one client connection holds in memory while
	// its header block arrives: the block, up to maxHeaderBytes + 4 KiB,
	// read into a line buffer that grows as it comes, and as much again
	// in the buffers it outgrew that the collector has not yet reclaimed;
	// beside it Go's 4 KiB read and write buffers, the goroutine's stack
	// and the connection's state, about 20 KiB. 4,100 connections each
	// sending 36,700 bytes of one header line, unfinished, took serve's
	// RSS from 23 MB to 395 MB (90.7 KB each; 7,000 bytes: 24 KB each).
	connHeld = 2*(maxHeaderBytes+4<<10) + 20<<10
	// asleepHeld: a connection in net/http's wait before its close
	// (maxAsleep), its buffers given back: its goroutine's stack.
	asleepHeld = 8 << 10
	// maxConnsHeld bounds what the client connections hold in memory at
	// once, request bodies apart (the proxy's body budget, 64 MiB):
	// (maxConns + spareConns) × connHeld + maxAsleep × asleepHeld =
	// 4,112 × 92 KiB + 4,096 × 8 KiB, about 401 MiB, held while a flood
	// lasts (each connection up to headerTimeout, and clients
	// may connect again) and handed back within minutes after it.
	// docs/serving.md and docs/design/runtime.md quote it
	// (TestConnMemoryBoundQuoted).
	maxConnsHeld = (maxConns+spareConns)*connHeld + maxAsleep*asleepHeld
)

// capFor is the connection cap under a descriptor limit of nofile.
func capFor(nofile int) int {
	return min(maxConns, max((nofile-connFDReserve)/2, minConns))
}

// slots counts the client connections open across every public listener
// serve has had (a rebind's old listener finishes its connections), in
// two pools: main, the cap, and spare, connections past it that may ask
// for /health, status and metrics alone (spareConns). Each keeps those waiting for a request
// in the order they began to wait.
type slots struct {
	main, spare pool
	// linger: connections in net/http's wait before their close, their
	// slot given back (lingerConns).
	linger chan struct{}
	// asleep counts the connections answered early whose goroutine has
	// not closed them yet (maxAsleep; max is it, tests lower it).
	asleep   atomic.Int64
	maxSleep int64
	life     time.Duration // a spare's (spareLife; tests lengthen it)
	// shed counts and logs a connection answered 503 at the cap
	// (proxy.Proxy.ShedConn: its rejected requests); nil counts nothing.
	shed func(capacity int)

	mu sync.Mutex // the pools' waiting lists and each slotConn's fields
}

// pool is one bound on connections.
type pool struct {
	ch   chan struct{}
	idle list.List // under slots.mu, of *slotConn: accepted or kept alive, no request in yet
}

func newSlots(n int) *slots {
	return &slots{main: pool{ch: make(chan struct{}, n)}, spare: pool{ch: make(chan struct{}, spareConns)}, linger: make(chan struct{}, lingerConns), maxSleep: maxAsleep, life: spareLife}
}

// take holds a slot of p for a new connection. At the cap it closes the
// connection that has waited longest for a request, as nginx reuses its
// idle keep-alive connections when worker_connections run out: otherwise
// clients that connect and send nothing, or keep connections alive and
// idle, would hold every slot until their timeouts (ReadHeaderTimeout,
// IdleTimeout), and every new request would read 503. Only a pool full of
// requests in progress refuses.
func (s *slots) take(p *pool) bool {
	for range 2 {
		select {
		case p.ch <- struct{}{}:
			return true
		default:
		}
		if !s.reclaim(p) {
			return false
		}
	}
	return false
}

// reclaim closes p's connection that has waited longest for a request. A
// request whose header completes in the instant between the choice and
// the close is lost with it, as with nginx's reuse of idle keep-alive
// connections; the longest waiter is the least likely to be sending.
func (s *slots) reclaim(p *pool) bool {
	s.mu.Lock()
	e := p.idle.Front()
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

// count counts and logs one connection answered 503 at the cap.
func (s *slots) count() {
	if s.shed != nil {
		s.shed(cap(s.main.ch))
	}
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
		c.waiting = c.p.idle.PushBack(c)
	}
}

// unlist takes c off its pool's waiting list; s.mu is held.
func (s *slots) unlist(c *slotConn) {
	if c.waiting != nil {
		c.p.idle.Remove(c.waiting)
		c.waiting = nil
	}
}

// cappedListener hands out a connection while a slot is free or one can be
// reclaimed (slots.take); past that a spare one, for /health, status and
// metrics alone
// (slots.guard); past both it answers 503 at once and closes the
// connection, so that clients holding connections cost the server a
// bounded number.
type cappedListener struct {
	net.Listener
	s *slots
}

// shedBody is what a request past the cap reads, as shedReply's body or
// a spare connection's answer to anything but /health.
const shedBody = `{"error":{"code":503,"message":"too many open connections to this server; retry in a second","type":"unavailable_error"}}` + "\n"

// shedReply is what a connection past the cap and the spares reads.
var shedReply = fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(shedBody), shedBody)

// sendBuffer caps the kernel's send buffer of a client connection, so
// that the proxy's send timeout (proxy.DefaultSendTimeout) starts soon
// after a client stops reading: left to itself Linux grows the buffer to
// 4 MiB (net.ipv4.tcp_wmem), some 18,000 tokens of a stream at about 225
// bytes a token, and a client that never read held its engine slot for
// minutes before any write blocked (TestClientSendBufferCapped). Linux
// doubles the value: 128 KiB in flight still carries 1.3 MB/s at a 100
// ms round trip, thousands of streamed tokens a second; a non-streamed
// answer of several MB (embeddings) takes seconds more over such a link.
const sendBuffer = 64 << 10

func (l *cappedListener) Accept() (net.Conn, error) {
	for {
		for !l.s.awake() {
			time.Sleep(asleepPoll)
		}
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetWriteBuffer(sendBuffer)
		}
		if l.s.take(&l.s.main) {
			return &slotConn{Conn: c, s: l.s, p: &l.s.main}, nil
		}
		if l.s.take(&l.s.spare) {
			sc := &slotConn{Conn: c, s: l.s, p: &l.s.spare, until: time.Now().Add(l.s.life)}
			sc.SetDeadline(sc.until)
			return sc, nil
		}
		l.s.count()
		// The write goes to a fresh socket's empty buffer; the deadline
		// keeps a client that never reads from holding the accept loop.
		c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
		c.Write(shedReply)
		c.Close()
	}
}

// awake reports whether a new connection may be accepted: fewer than
// maxAsleep answered early are waiting for their close (maxAsleep).
func (s *slots) awake() bool { return s.asleep.Load() < s.maxSleep }

// spareKey marks the context of a spare connection's requests.
type spareKey struct{}

// connContext is the public servers' http.Server.ConnContext: it marks
// a spare connection's requests for guard.
func (s *slots) connContext(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := nc.(*slotConn); ok && c.p == &s.spare {
		return context.WithValue(ctx, spareKey{}, true)
	}
	return ctx
}

// guard passes a spare connection's request to h only where spareServes
// says so; anything else reads shedBody's 503, counted as a shed. Either
// answer closes the connection, and nothing more of a body is read: Go
// reads up to 256 KiB of a body the handler left before closing, which a
// body stalled behind a /health could hold for the spare's whole life
// (with no body, Go's own read for the client's close is left alone).
// With more of it left, Go half-closes and waits before the close, and
// the spare is given back at the half-close (slotConn.CloseWrite).
func (s *slots) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(spareKey{}) == nil {
			h.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Connection", "close")
		if spareServes(r) {
			h.ServeHTTP(w, r)
		} else {
			s.count()
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(shedBody))
		}
		if r.ContentLength != 0 { // -1: chunked
			http.NewResponseController(w).SetReadDeadline(time.Now())
		}
	})
}

// spareServes says what a spare connection may ask (GET or HEAD): /health,
// and the two pages an operator watches a full cap by, whose 503s
// proxy.rejected_total and speclaunch_requests_rejected_total count (they
// read 503 themselves at a full cap, so the count could not be seen while
// it rose). /metrics reads the engine's series within its 3 s bound
// (proxy.DefaultMetricsTimeout), inside a spare's life.
func spareServes(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/health", proxy.StatusPath, "/metrics":
		return true
	}
	return false
}

// slotConn gives its slot back once: when closed, or when net/http
// half-closes it to wait before the close (CloseWrite).
type slotConn struct {
	net.Conn
	s     *slots
	p     *pool     // the pool it holds a slot of
	until time.Time // a spare's end: no deadline set on it goes past this
	once  sync.Once

	// Under s.mu: its place on the waiting list, whether its slot was
	// given back (closed: it never joins the list again), and whether it
	// holds a place of s.linger.
	waiting *list.Element
	closed  bool
	lingers bool
	early   bool // answered early: counted in s.asleep until its Close
}

// give gives c's slot back, once.
func (c *slotConn) give() {
	c.once.Do(func() {
		c.s.mu.Lock()
		c.closed = true
		c.s.unlist(c)
		c.s.mu.Unlock()
		<-c.p.ch
	})
}

func (c *slotConn) Close() error {
	c.give()
	c.s.mu.Lock()
	lingered, early := c.lingers, c.early
	c.lingers, c.early = false, false
	c.s.mu.Unlock()
	if lingered {
		<-c.s.linger
	}
	if early {
		c.s.asleep.Add(-1)
	}
	return c.Conn.Close()
}

// clamp bounds a spare's deadlines by its life: net/http sets the read
// deadline to ReadHeaderTimeout (30 s) for a header and clears it after,
// and the proxy renews a body's, which would let a spare outlive it.
func (c *slotConn) clamp(t time.Time) time.Time {
	if !c.until.IsZero() && (t.IsZero() || t.After(c.until)) {
		return c.until
	}
	return t
}

func (c *slotConn) SetDeadline(t time.Time) error { return c.Conn.SetDeadline(c.clamp(t)) }

func (c *slotConn) SetReadDeadline(t time.Time) error { return c.Conn.SetReadDeadline(c.clamp(t)) }

func (c *slotConn) SetWriteDeadline(t time.Time) error {
	return c.Conn.SetWriteDeadline(c.clamp(t))
}

// CloseWrite is net/http's half-close of a connection it has answered
// early with the client's request unread (a 431, a 408, a spare's 503),
// after which it waits 500 ms (rstAvoidanceDelay) and closes it. The FIN
// tells the client at once, so the slot is given back here, not at the
// close, and the wait holds a place of s.linger instead (lingerConns);
// with none free the connection is closed at once.
func (c *slotConn) CloseWrite() error {
	c.s.mu.Lock()
	if !c.early {
		c.early = true
		c.s.asleep.Add(1) // until net/http's Close after its wait
	}
	c.s.mu.Unlock()
	select {
	case c.s.linger <- struct{}{}:
	default:
		c.give()
		return c.Conn.Close()
	}
	c.s.mu.Lock()
	c.lingers = true
	c.s.mu.Unlock()
	c.give() // before the FIN: a client that reads the end finds the slot free
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
