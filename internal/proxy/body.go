package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds on request bodies. maxReplay bounds one kept body; the budget
// bounds them all: 48 concurrent 7.5 MiB bodies took the launcher from 22
// MB to 575 MB of RSS, kept afterwards (docs/design/runtime.md). A body that does
// not fit the budget streams through to the engine (full duplex) instead
// of being kept, so it cannot be re-sent if its engine dies before
// answering; nothing is refused for it.
const (
	// DefaultBodyBudget is eight bodies at the replay cap: LLM request
	// bodies are kilobytes, so thousands of ordinary ones fit.
	DefaultBodyBudget = 8 * maxReplay
	// DefaultBodyTimeout is how long a request body may take to arrive
	// whole: 100 connections sending theirs at 1 byte/s were never closed.
	// Two minutes carry an 8 MiB body at 70 KB/s.
	DefaultBodyTimeout = 2 * time.Minute
	// freeAfter: once the bodies kept fall back to none after holding at
	// least this much, the heap they left is handed back to the OS
	// (debug.FreeOSMemory), at most once per freeEvery; the runtime would
	// otherwise keep it until its next forced GC, minutes later.
	freeAfter = 2 * maxReplay
	freeEvery = 10 * time.Second
	// A body is kept as it arrives, in chunks each reserved just before it
	// is read into: firstChunk, then as much as has come, up to bodyChunk.
	// So a body holds at most about twice what it sent, plus firstChunk:
	// the load review of 088c135 had 8 connections that sent headers with
	// Content-Length: 8388608, then 1 byte/s, hold the whole budget when a
	// body's length was reserved before any byte came. At 4 KiB, serve's
	// most connections (4,096, internal/serve/conns.go) that each sent a
	// byte hold 16 MiB, a quarter of the default budget; LLM request
	// bodies are kilobytes, so most take one or two chunks.
	firstChunk = 4 << 10
	bodyChunk  = 64 << 10
)

// bodyBudget counts the bytes of request bodies kept in memory.
type bodyBudget struct {
	mu       sync.Mutex
	max      int64
	held     int64
	peak     int64     // the most held since the last hand-back
	lastFree time.Time // when memory was last handed back
	now      func() time.Time
	free     func()       // debug.FreeOSMemory; tests count calls
	spawn    func(func()) // runs free off the caller's goroutine; tests run it in place
	streamed int64        // bodies that did not fit and streamed through
}

func newBodyBudget(max int64) *bodyBudget {
	return &bodyBudget{max: max, now: time.Now, free: debug.FreeOSMemory, spawn: func(f func()) { go f() }}
}

// acquire reserves n bytes; false when they do not fit.
func (b *bodyBudget) acquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held+n > b.max {
		return false
	}
	b.held += n
	b.peak = max(b.peak, b.held)
	return true
}

// release returns n bytes; when nothing is held any more after a peak of
// freeAfter or more, the memory goes back to the OS (off the caller's
// goroutine).
func (b *bodyBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.held -= n
	free := b.held == 0 && b.peak >= freeAfter && b.now().Sub(b.lastFree) >= freeEvery
	if free {
		b.peak, b.lastFree = 0, b.now()
	}
	b.mu.Unlock()
	if free {
		b.spawn(b.free)
	}
}

func (b *bodyBudget) stats() (held, streamed int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held, b.streamed
}

// errBodyTimeout: the body did not arrive within the body timeout.
var errBodyTimeout = errors.New("the request body did not arrive in time")

// replayable reads the request body before anything goes upstream, so that
// (1) the engine's answer can start streaming while nothing is left to
// read from the client: net/http's server would otherwise consume the
// unread body itself once the response headers go out, racing the
// transport that is still sending it, and the transport then closes the
// engine connection mid-stream (a stream cut after its first token); and
// (2) a request whose engine died before answering can be sent again. A
// body over maxReplay, or one the budget has no room for, streams through
// in full-duplex mode, without a re-send. The whole body must arrive
// within the body timeout. release returns the bytes kept to the budget
// once the request is over.
func (p *Proxy) replayable(w http.ResponseWriter, r *http.Request) (release func(), err error) {
	release = func() {}
	if r.Body == nil || r.Body == http.NoBody {
		return release, nil
	}
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(p.o.BodyTimeout)
	if err := rc.SetReadDeadline(deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return release, err
	}
	// The deadline ends with the body: read whole here, or read by the
	// transport when it streams through.
	clear := func() { rc.SetReadDeadline(time.Time{}) }
	var kept [][]byte
	var n, size int64
	whole := false
	switch cl := r.ContentLength; {
	case cl > maxReplay: // streams from its first byte
	case cl >= 0:
		kept, n, size, whole, err = p.keep(r.Body, cl, true)
	default: // one byte past the cap tells a body over it
		kept, n, size, whole, err = p.keep(r.Body, maxReplay+1, false)
	}
	release = func() { p.bodies.release(n) }
	if err != nil {
		return release, bodyErr(err)
	}
	if whole {
		clear()
		r.ContentLength = size
		r.Body = io.NopCloser(chunkReader(kept))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(chunkReader(kept)), nil }
		return release, nil
	}
	p.bodies.mu.Lock()
	p.bodies.streamed++
	p.bodies.mu.Unlock()
	r.Body = &deadlineBody{r: io.MultiReader(chunkReader(kept), r.Body), c: r.Body, clear: clear, deadline: deadline}
	return release, fullDuplex(w)
}

// keep reads up to limit bytes of a body as they arrive, each chunk
// reserved from the budget just before it is read into (firstChunk). n
// is what it reserved, size what it read. whole says the body ended
// within limit: at it exactly when exact (a known length), before it
// otherwise. When not whole, kept is the body's start (the budget ran
// out, or a body of unknown length passed the cap) and the rest streams.
func (p *Proxy) keep(body io.Reader, limit int64, exact bool) (kept [][]byte, n, size int64, whole bool, err error) {
	for size < limit {
		c := min(bodyChunk, max(firstChunk, size), limit-size)
		if !p.bodies.acquire(c) {
			return kept, n, size, false, nil
		}
		n += c
		buf := make([]byte, c)
		k, err := io.ReadFull(body, buf)
		kept, size = append(kept, buf[:k]), size+int64(k)
		switch {
		case err == nil:
		case !exact && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
			return kept, n, size, true, nil
		case errors.Is(err, io.EOF):
			return nil, n, size, false, io.ErrUnexpectedEOF // shorter than its Content-Length
		default:
			return nil, n, size, false, err
		}
	}
	return kept, n, size, exact, nil
}

// chunkReader reads kept chunks in order.
func chunkReader(kept [][]byte) io.Reader {
	rs := make([]io.Reader, len(kept))
	for i, c := range kept {
		rs[i] = bytes.NewReader(c)
	}
	return io.MultiReader(rs...)
}

// bodyErr names a body that ran past its deadline.
func bodyErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errBodyTimeout
	}
	return err
}

// deadlineBody streams a body through and lifts the read deadline once it
// has been read to its end.
type deadlineBody struct {
	r     io.Reader
	c     io.Closer
	clear func()
	// ended: read to its end. The transport's writer reads the body while
	// the handler's ModifyResponse asks (bodyLeft), so it is atomic.
	ended atomic.Bool
	// late: the body ran past the body timeout (the answer is 408).
	late atomic.Bool
	// deadline: when the body timeout ends. The server cancels the
	// request's context on the deadline before Read sees the error, so
	// bodyLate also reads the clock.
	deadline time.Time
	// onEnd, when set, runs once when the body has been read to its end
	// (slot.beginLate).
	onEnd func()
}

// bodyLeft reports that the request of ctx (the proxy's slot) has a body
// that streams through and was not read to its end: its answer must close
// the connection, or the rest of the body would be read as the next
// request on it.
func bodyLeft(ctx context.Context) bool {
	d := streamed(ctx)
	return d != nil && !d.ended.Load()
}

// bodyLate reports that the request of ctx has a body that streams
// through and ran past the body timeout.
func bodyLate(ctx context.Context) bool {
	d := streamed(ctx)
	return d != nil && (d.late.Load() || !d.ended.Load() && !time.Now().Before(d.deadline))
}

// streamed is the body of ctx's request when it streams through, else nil.
func streamed(ctx context.Context) *deadlineBody {
	if s, ok := ctx.Value(slotKey{}).(*slot); ok {
		if d, ok := s.in.(*deadlineBody); ok {
			return d
		}
	}
	return nil
}

func (d *deadlineBody) Read(b []byte) (int, error) {
	n, err := d.r.Read(b)
	if errors.Is(err, io.EOF) && !d.ended.Swap(true) {
		d.clear()
		if d.onEnd != nil {
			d.onEnd()
		}
	}
	err = bodyErr(err)
	if errors.Is(err, errBodyTimeout) {
		d.late.Store(true)
	}
	return n, err
}

func (d *deadlineBody) Close() error { return d.c.Close() }
