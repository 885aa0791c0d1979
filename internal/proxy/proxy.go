// Package proxy is speclaunch's front proxy: it owns the public address and
// passes every request through to the engine that serves now, so that an
// engine can be replaced under live traffic without a failed request.
//
// It knows nothing of widths or policies. serve's runtime (package
// server, driven by package serve) tells it where to send requests (Route)
// and when to hold them (Hold); the proxy counts each backend's requests in
// flight so an old engine can be drained before it is stopped, and apart
// from them the clients' generation requests (generates), the load a width
// schedule is followed by.
//
// What a client sees:
//   - bodies and responses are streamed; server-sent events are flushed as
//     they arrive; headers pass through (hop-by-hop ones excepted, as any
//     HTTP proxy must); a client that goes away cancels its upstream request;
//   - while requests are held (a drain switch, or an engine restarting after
//     a crash) they wait in a bounded FIFO queue and are released in arrival
//     order; one that waits past the hold timeout, or arrives when the queue
//     is full, gets 503 with Retry-After and a JSON error body;
//   - a request whose connection to the engine is refused (nothing was sent:
//     the engine died between routing and dialing) is sent again to whichever
//     engine serves next instead of failing; one that cannot connect for
//     want of speclaunch's own resources (descriptors, ports) gets 503 with
//     Retry-After, and the engine keeps serving;
//   - GET and HEAD /health are answered by the proxy without holding, never
//     by asking an engine: 200 {"status":"ok"} when one serves, 200
//     {"status":"ok","speclaunch":"switching"} while requests are held, 503
//     "Loading model" before the first engine is ready, as llama-server
//     answers while it loads; HEAD of the other paths the launcher owns
//     (StatusPath, MetricsPath, /metrics) never reaches an engine either,
//     and any method but GET and HEAD on StatusPath and MetricsPath gets
//     405 with Allow: GET, HEAD.
package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/speclaunch/speclaunch/internal/netfail"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// StatusPath is served by the proxy itself (Options.Status).
const StatusPath = "/speclaunch/status"

// MetricsPath serves speclaunch's own series alone (Options.Metrics).
const MetricsPath = "/speclaunch/metrics"

// Defaults for Options.
const (
	DefaultQueueSize   = 1024
	DefaultHoldTimeout = 2 * time.Minute
)

// Backend is one engine the proxy can send requests to.
type Backend struct {
	URL  *url.URL
	Name string // for logs: "pid 1234, width 4"

	mu       sync.Mutex
	inflight int
	zero     chan struct{} // closed when inflight reaches 0 (made by Drain)
	dead     atomic.Bool   // the engine is gone (Gone): it no longer serves, for good
	refused  atomic.Bool   // a dial was refused (netfail.Refused); lifted when the engine answers again (Proxy.Answered)
	gone     chan struct{} // closed by Gone: the engine died or hung
	last     atomic.Bool   // no engine follows it (GoneLast): speclaunch stops
	goneOnce sync.Once
	closing  atomic.Bool            // the engine is being stopped: no new launcher request starts on it
	stopWhy  atomic.Pointer[string] // set by StopsWith: speclaunch stops it with requests in flight
	work     workMeter              // clients' requests that ask the engine for work (under mu)
	clock    func() time.Time
}

// NewBackend parses an engine's base URL ("http://127.0.0.1:40123").
func NewBackend(baseURL, name string) (*Backend, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("bad engine URL %q: want http://host:port", baseURL)
	}
	return &Backend{URL: u, Name: name, gone: make(chan struct{})}, nil
}

// Gone marks the engine dead (it exited or hung): a request that has had
// no response byte from it is sent to the next engine instead of failing.
func (b *Backend) Gone() {
	b.dead.Store(true)
	b.goneOnce.Do(func() { close(b.gone) })
}

// GoneLast marks the engine dead with no engine to follow it (no restart
// policy): speclaunch stops, and a request it left unanswered gets 503,
// as the log says, not the next engine.
func (b *Backend) GoneLast() {
	b.last.Store(true)
	b.Gone()
}

// out reports that b takes no new request: gone, or its last dial refused.
func (b *Backend) out() bool { return b.dead.Load() || b.refused.Load() }

// Closing marks the engine as being stopped: Track refuses new launcher
// requests on it (they move to the engine that replaces it).
func (b *Backend) Closing() { b.closing.Store(true) }

// StopsWith says that speclaunch stops the engine with requests still in
// flight, and why (its drain timeout passed). A client whose answer the
// stop cuts is told that, not that the engine failed, and the proxy logs
// no engine failure for it: whoever stops it says so.
func (b *Backend) StopsWith(why string) { b.stopWhy.Store(&why) }

// stoppedWhy is StopsWith's reason as a Cause; the zero Cause when
// speclaunch did not stop b under its requests.
func (b *Backend) stoppedWhy() Cause {
	if b == nil {
		return Cause{}
	}
	if w := b.stopWhy.Load(); w != nil {
		return Cause{What: "speclaunch stopped the engine", Why: *w}
	}
	return Cause{}
}

// Cause is what ended the requests an engine left unanswered, as their
// clients read it: What happened ("the engine exited with code 137",
// "speclaunch stopped the engine") and, when known, Why, said after the
// moment it happened ("... before it answered (the shutdown timeout
// passed)"). The zero Cause is none: the engine failed on its own.
type Cause struct{ What, Why string }

// at says the cause at a moment of the request ("before it answered").
func (c Cause) at(when string) string {
	s := c.What + " " + when
	if c.Why != "" {
		s += " (" + c.Why + ")"
	}
	return s
}

// ErrEngineReplaced refuses a launcher request on an engine being stopped.
var ErrEngineReplaced = errors.New("the engine is being replaced; ask the serving one")

// Track counts one of the launcher's own requests (a probe, a scrape, a
// verification) in flight on b, like a client's, so that b is not
// stopped under it; release ends it. It fails once b is being stopped.
func (b *Backend) Track() (release func(), err error) {
	if b.closing.Load() || b.out() {
		return nil, ErrEngineReplaced
	}
	b.add(1)
	var once sync.Once
	return func() { once.Do(func() { b.add(-1) }) }, nil
}

// InFlight is the number of requests being served by the backend now.
func (b *Backend) InFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inflight
}

func (b *Backend) add(d int) {
	b.mu.Lock()
	b.inflight += d
	if b.inflight == 0 && b.zero != nil {
		close(b.zero)
		b.zero = nil
	}
	b.mu.Unlock()
}

// Generating is the number of clients' generation requests (generates)
// being served by the backend now: the engine's batch, where InFlight
// also counts reads of its state and speclaunch's own requests.
func (b *Backend) Generating() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.work.n
}

// Served is how long clients' generation requests (generates) took on this
// engine, summed over those that ended well (the whole answer sent, a
// status below 400, the client still there), from the moment the proxy
// handed each to it to the last byte of its answer, and how many: the
// time a client waits, where the engine's own timings leave out its queue
// and the hand-back.
// slots is the engine's (0: unknown); a request that shared the engine
// with more than that counts only its share (workMeter.served). Both only
// grow.
func (b *Backend) Served(slots int) (secs float64, ended int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.work.served(slots), b.work.ended
}

func (b *Backend) now() time.Time {
	if b.clock != nil {
		return b.clock()
	}
	return time.Now()
}

// beginWork counts a client's request for work on b (generates).
func (b *Backend) beginWork() workMark {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.work.begin(b.now())
}

// endWork ends it; count false when it did not end well here (failed,
// cancelled, or sent on to another engine unanswered).
func (b *Backend) endWork(w workMark, count bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.work.end(w, b.now(), count)
}

// generates says whether a request asks the engine to decode tokens: a
// POST to one of the generation routes (a GET of one is answered 404 or
// 405 and decodes nothing). Only these fill the engine's batch, so only
// they are the load a width schedule is followed by (Proxy.Generating)
// and the work a width is measured by (Backend.Served). Others (/v1/models,
// /props, /metrics, /slots, /tokenize, /apply-template, /embedding, slot
// saves) move neither.
func generates(method, path string) bool {
	return method == http.MethodPost && generationPaths[path]
}

// generationPaths are llama-server's routes that decode tokens, its
// Ollama /api/chat and Anthropic /v1/messages included; mlxcel's and the
// OpenAI routes of vLLM and SGLang are among them.
var generationPaths = map[string]bool{
	"/completion": true, "/completions": true, "/v1/completions": true,
	"/chat/completions": true, "/v1/chat/completions": true, "/api/chat": true,
	"/infill": true, "/v1/messages": true, "/v1/responses": true,
}

// Drain waits until no request is in flight on b, or ctx ends. It returns
// the number still in flight (0 when drained).
func (b *Backend) Drain(ctx context.Context) int {
	b.mu.Lock()
	if b.inflight == 0 {
		b.mu.Unlock()
		return 0
	}
	if b.zero == nil {
		b.zero = make(chan struct{})
	}
	ch := b.zero
	b.mu.Unlock()
	select {
	case <-ch:
		return 0
	case <-ctx.Done():
		return b.InFlight()
	}
}

// Options tune a Proxy.
type Options struct {
	QueueSize   int           // held requests at most; 0 = DefaultQueueSize
	HoldTimeout time.Duration // how long a request may be held; 0 = DefaultHoldTimeout
	// Status answers StatusPath; nil = 404 there.
	Status http.Handler
	Log    *slog.Logger
	// Transport reaches the engines; nil = a loopback transport tuned for
	// many concurrent streams.
	Transport http.RoundTripper
	// APIKeys are the engine's keys: StatusPath then asks for one of them
	// as llama-server asks on its own routes (401 otherwise); /health
	// stays public. Every other request goes to the engine, which checks
	// it.
	APIKeys []string
	// LlamaKeyRule says the engine checks APIKeys as llama-server does
	// (secret.Refused: llama.cpp, mlxcel-server, the sim): a request that
	// waits for 100 Continue and that check refuses is answered its 401
	// here, before its body is asked for. Off (vLLM, SGLang, whose rules
	// differ), the engine answers every such request itself.
	LlamaKeyRule bool
	// Metrics, when set, gives speclaunch's own series (Prometheus text):
	// served at MetricsPath and appended to the engine's on GET /metrics.
	Metrics func() []byte
	// BodyBudget bounds the request bodies kept in memory, all requests
	// together; 0 = DefaultBodyBudget.
	BodyBudget int64
	// BodyTimeout is how long a request body may take to arrive whole;
	// 0 = DefaultBodyTimeout.
	BodyTimeout time.Duration
	// SendTimeout is how long one write of an answer may wait for the
	// client; 0 = DefaultSendTimeout.
	SendTimeout time.Duration
	// MetricsTimeout bounds the engine's part of GET /metrics; 0 =
	// DefaultMetricsTimeout.
	MetricsTimeout time.Duration
}

// DefaultMetricsTimeout bounds the engine's series in GET /metrics.
// Prometheus' default scrape_timeout is 10 s: waiting as long on a hung
// engine failed the whole scrape, speclaunch's own series with it (the
// restarts and the state that say what is wrong), just when they matter.
// 3 s leaves a scrape with the default timeout 7 s for the rest, and one
// lowered to 5 s still gets speclaunch's series.
const DefaultMetricsTimeout = 3 * time.Second

// Proxy routes requests to the backend that serves now.
type Proxy struct {
	o  Options
	rp *httputil.ReverseProxy

	mu      sync.Mutex
	cur     *Backend      // nil before the first Route and while held
	ready   bool          // some backend has served: /health says "switching", not "loading"
	holding bool          // new requests wait in queue
	closed  bool          // speclaunch has stopped: nothing waits any more
	stopped chan struct{} // closed with closed: waitGone stops waiting
	cut     Cause         // Close's cause, set before stopped is closed
	refuse  bool          // speclaunch is stopping: new requests get 503, held ones stay
	queue   []*waiter     // FIFO

	held, rejected, retried atomic.Int64
	generating              atomic.Int64 // clients' generation requests taken and not yet answered (Generating)
	bodies                  *bodyBudget
	localFails              burst // 503s for speclaunch's own want of resources, logged in bursts
	stalls                  burst // answers cut by the send timeout (a client stopped reading), logged in bursts
	shedConns               burst // client connections answered 503 at serve's connection cap (ShedConn), logged in bursts
}

type waiter struct {
	ch chan *Backend // receives the backend when released
}

// New makes a proxy that holds every request until the first Route.
func New(o Options) *Proxy {
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.HoldTimeout <= 0 {
		o.HoldTimeout = DefaultHoldTimeout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.BodyBudget <= 0 {
		o.BodyBudget = DefaultBodyBudget
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = DefaultSendTimeout
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = DefaultBodyTimeout
	}
	if o.MetricsTimeout <= 0 {
		o.MetricsTimeout = DefaultMetricsTimeout
	}
	if o.Transport == nil {
		o.Transport = &http.Transport{
			// answerFirst: an engine's refusal of a body still being
			// sent reaches the client, not the write's failure.
			DialContext: dialAnswerFirst((&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext),
			// One loopback connection per request: llama-server d32676d
			// closes a connection shortly after each streamed answer while
			// advertising keep-alive, so a reused connection lost the next
			// request (a 502 or a cut stream). A loopback dial costs tens
			// of microseconds, next to a completion's milliseconds.
			DisableKeepAlives: true,
			// Engines answer plain HTTP/1.1 on loopback; compression would
			// only add CPU and break byte-for-byte pass-through.
			DisableCompression: true,
			ForceAttemptHTTP2:  false,
		}
	}
	p := &Proxy{o: o, holding: true, stopped: make(chan struct{}), bodies: newBodyBudget(o.BodyBudget)}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			s := pr.In.Context().Value(slotKey{}).(*slot)
			pr.SetURL(s.b.URL)
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			// speclaunch's server answers a client's Expect: 100-continue
			// as the body is read; the engine's own 100 would reach the
			// client as a second one.
			pr.Out.Header.Del("Expect")
			// The inbound body stays ours: a refused dial must leave it
			// unread and open so the request can go to the next engine.
			if pr.Out.Body != nil && pr.Out.Body != http.NoBody {
				pr.Out.Body = io.NopCloser(pr.In.Body)
			}
		},
		Transport: &retrying{p: p, base: o.Transport},
		// An engine that answers before reading a streamed body to its
		// end (a refusal of its size): the answer closes the connection,
		// or the rest of the body would be read as the next request.
		ModifyResponse: func(resp *http.Response) error {
			if bodyLeft(resp.Request.Context()) {
				resp.Header.Set("Connection", "close")
			}
			return nil
		},
		FlushInterval: -1, // every write reaches the client at once: SSE tokens are not batched
		BufferPool:    bufPool{},
		ErrorLog:      slog.NewLogLogger(o.Log.Handler(), slog.LevelDebug),
		ErrorHandler:  p.upstreamError,
	}
	return p
}

// Route sends new requests to b from now on and releases every held
// request to it, in arrival order.
func (p *Proxy) Route(b *Backend) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur, p.holding, p.ready = b, false, true
	p.release(b)
}

// release hands every held request to b, in arrival order (under mu).
func (p *Proxy) release(b *Backend) {
	for _, w := range p.queue {
		b.add(1)
		w.ch <- b // buffered: never blocks
	}
	p.queue = nil
}

// Answered says b's engine answered its liveness check: the mark of a
// refused dial on it is lifted and, while it still serves, the requests
// held meanwhile go to it. Otherwise a refusal from an engine that lives
// on held every request until the hold timeout, for good. An engine
// marked gone stays gone.
func (p *Proxy) Answered(b *Backend) {
	if !b.refused.CompareAndSwap(true, false) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == b && !p.holding && !p.closed && !b.dead.Load() {
		p.release(b)
	}
}

// Close answers every held request, and every later one, with 503: the
// launcher is stopping and no engine will come. cut is why the requests
// still on an engine end unanswered (the engine exited, or speclaunch
// stopped it: the shutdown timeout passed, a second signal came), which
// their clients are told; the first Close's cause stays.
func (p *Proxy) Close(cut Cause) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.cut = cut
		close(p.stopped)
	}
	p.closed, p.cur = true, nil
	for _, w := range p.queue {
		w.ch <- nil
	}
	p.queue = nil
}

// SayHeld logs the warnings the burst throttle holds (clients that
// stopped reading, speclaunch's want of resources) now, not at their
// window's end: serve calls it once the public listener is closed, so
// that every event is counted in some line before the process exits.
func (p *Proxy) SayHeld() {
	p.localFails.sayHeld()
	p.stalls.sayHeld()
	p.shedConns.sayHeld()
}

// ShedConn counts a client connection answered 503 and closed at the
// public listener's connection cap (internal/serve/conns.go) among the
// requests rejected, as the client reads the same 503 a full queue gives,
// and logs it at warn in bursts: a flood sheds thousands a second, and
// before it was counted nowhere and logged never. capacity is the cap.
func (p *Proxy) ShedConn(capacity int) {
	p.rejected.Add(1)
	p.shedConns.warn(p.o.Log, "proxy: a client connection was answered 503 and closed: every connection the server allows has a request in progress; /health, the status page and /metrics have spare ones (docs/serving.md)",
		"cap", capacity)
}

// Refuse answers new requests, and /health, with 503 and Retry-After:
// the launcher is stopping (readiness goes down at once). Requests in
// flight go on; held ones stay held for an engine that is starting.
func (p *Proxy) Refuse() {
	p.mu.Lock()
	p.refuse = true
	p.mu.Unlock()
}

// SetLimits changes the queue bound and the hold timeout (a reload);
// requests already waiting keep the timeout they started with.
func (p *Proxy) SetLimits(queueSize int, hold time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if queueSize > 0 {
		p.o.QueueSize = queueSize
	}
	if hold > 0 {
		p.o.HoldTimeout = hold
	}
}

// SetAPIKeys replaces the keys StatusPath asks for and whether the engine
// checks them as llama-server does (Options.LlamaKeyRule): the engine that
// serves next may have others, or be another engine.
func (p *Proxy) SetAPIKeys(keys []string, llamaRule bool) {
	p.mu.Lock()
	p.o.APIKeys, p.o.LlamaKeyRule = keys, llamaRule
	p.mu.Unlock()
}

// Hold makes new requests wait until the next Route. Requests already
// routed go on.
func (p *Proxy) Hold() {
	p.mu.Lock()
	p.holding, p.cur = true, nil
	p.mu.Unlock()
}

// Current is the backend new requests go to; nil while held.
func (p *Proxy) Current() *Backend {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// Stats are the proxy's counters for the status endpoint.
type Stats struct {
	HeldNow       int   `json:"held_now"`
	Holding       bool  `json:"holding"`
	QueueSize     int   `json:"queue_size"`
	HoldTimeoutS  int   `json:"hold_timeout_s"`
	HeldTotal     int64 `json:"held_total"`
	RejectedTotal int64 `json:"rejected_total"` // 503s: queue full, held too long, stopping, out of resources, connections past the cap
	RetriedTotal  int64 `json:"retried_total"`  // requests sent again to a next engine (refused, or unanswered by a gone one)
	// BodyBytesHeld are the request bodies kept in memory now (bounded by
	// Options.BodyBudget); BodiesStreamed counts the bodies that did not
	// fit and streamed through without a re-send.
	BodyBytesHeld  int64 `json:"body_bytes_held"`
	BodiesStreamed int64 `json:"bodies_streamed_total"`
}

// Stats reports the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	n, h, q, hold := len(p.queue), p.holding, p.o.QueueSize, p.o.HoldTimeout
	p.mu.Unlock()
	bh, bs := p.bodies.stats()
	return Stats{HeldNow: n, Holding: h, QueueSize: q, HoldTimeoutS: int(hold / time.Second),
		HeldTotal: p.held.Load(), RejectedTotal: p.rejected.Load(), RetriedTotal: p.retried.Load(),
		BodyBytesHeld: bh, BodiesStreamed: bs}
}

// Generating is the number of clients' generation requests (generates)
// the proxy has taken and not yet answered: held for an engine, or on any
// engine, a draining one's included. It is the server's load as a width
// schedule reads it (docs/schedule.md): a poll of /v1/models or /metrics,
// a tokenize call or speclaunch's own probe fills no batch, so none of
// them counts.
func (p *Proxy) Generating() int { return int(p.generating.Load()) }

// errHeld is a request that could not be given a backend in time.
type errHeld struct {
	why      string
	stopping bool // the launcher is stopping: retry elsewhere at once
}

func (e *errHeld) Error() string { return e.why }

// acquire returns the backend for one request, counted in flight, waiting
// in the queue while requests are held. skip is the backend a retried
// request left (it may take the request again once its mark lifts: out()
// is the only gate, so that a refusal lifted between the mark and this
// call does not queue the request with nothing to release it).
func (p *Proxy) acquire(ctx context.Context, skip *Backend) (*Backend, error) {
	p.mu.Lock()
	if p.closed || p.refuse && skip == nil {
		p.mu.Unlock()
		return nil, errStopping
	}
	if b := p.cur; b != nil && !p.holding && !b.out() {
		b.add(1)
		p.mu.Unlock()
		return b, nil
	}
	hold, what := p.o.HoldTimeout, p.heldFor()
	if len(p.queue) >= p.o.QueueSize {
		p.mu.Unlock()
		return nil, &errHeld{why: fmt.Sprintf("%s and %d requests are already waiting (server.queue_size)", what, p.o.QueueSize)}
	}
	w := &waiter{ch: make(chan *Backend, 1)}
	p.queue = append(p.queue, w)
	p.mu.Unlock()
	p.held.Add(1)

	t := time.NewTimer(hold)
	defer t.Stop()
	select {
	case b := <-w.ch:
		if b == nil {
			return nil, p.closedHeld()
		}
		return b, nil
	case <-t.C:
		if b, released := p.dequeue(w); released {
			if b == nil {
				return nil, p.closedHeld()
			}
			return b, nil
		}
		return nil, &errHeld{why: fmt.Sprintf("%s and no engine became ready within %s (server.hold_timeout)", what, hold)}
	case <-ctx.Done():
		if b, _ := p.dequeue(w); b != nil {
			b.add(-1)
		}
		return nil, ctx.Err()
	}
}

// heldFor says why requests are held (under mu): before any engine has
// served, the first one is starting; after, an engine is being switched
// (or restarted).
func (p *Proxy) heldFor() string {
	if !p.ready {
		return "the engine is starting"
	}
	return "the engine is being switched"
}

// closedHeld is the error of a held request the proxy let go with no
// backend: errCut, answered with Close's cause (the runtime gives one on
// every path: a signal in a crashed engine's back-off, an engine stopped
// loading, the shell's close at exit); errStopping where Close had none.
// Before, such a request was told only that speclaunch stops.
func (p *Proxy) closedHeld() error {
	if p.cause(nil).What != "" {
		return errCut
	}
	return errStopping
}

// answerCut answers a request no engine will answer with what ended it.
func (p *Proxy) answerCut(w http.ResponseWriter, c Cause) {
	p.rejected.Add(1)
	writeError(w, http.StatusServiceUnavailable, c.at("before it answered")+"; retry shortly", "unavailable_error", 1)
}

// errCut is a held request Close let go with a cause: ServeHTTP answers it
// with the cause (Proxy.cause).
var errCut = errors.New("no engine came for the request and the proxy closed")

// errStopping answers requests while the launcher stops.
var errStopping = &errHeld{why: "speclaunch is stopping", stopping: true}

// dequeue removes w from the queue; if it was released meanwhile, it
// returns what it was released with (a backend still counted in flight, or
// nil when the proxy closed) and released = true.
func (p *Proxy) dequeue(w *waiter) (b *Backend, released bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, q := range p.queue {
		if q == w {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			return nil, false
		}
	}
	return <-w.ch, true // released between the timer and the lock
}

type slotKey struct{}

// slot is the backend one request is counted against; the transport moves
// it when a dial is refused. work is its start on b when it asks for work,
// status the engine's answer's.
type slot struct {
	b      *Backend
	work   workMark
	status int
	in     io.ReadCloser // the client's body as the handler reads it

	// A generation whose body streams through counts as load and work from
	// the end of its body (beginLate), which the transport's writer reads:
	// mu guards work and b against the handler's end of it, ended says the
	// handler is done, late that beginLate counted it.
	mu          sync.Mutex
	ended, late bool
}

// beginLate counts a generation whose body streams through once the body
// is whole: six clients that each sent 9 MiB of a 20 MB body and stalled
// read as load 6, and the follower turned speculation off for everyone,
// though no engine had a request to decode.
func (s *slot) beginLate(p *Proxy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended && !s.late {
		s.late = true
		p.generating.Add(1)
		s.work = s.b.beginWork()
	}
}

// end ends the request's work on its engine (count: it ended well) and a
// late count of its load.
func (s *slot) end(p *Proxy, count bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	if s.late {
		p.generating.Add(-1)
	}
	s.b.endWork(s.work, count)
}

// ServeHTTP proxies one request.
func (p *Proxy) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := withSendDeadline(rw, p.o.SendTimeout)
	defer p.sayStalled(w, r) // also when a cut answer panics out of the handler
	if p.answeredHere(w, r) {
		return
	}
	release, err := p.replayable(w, r)
	defer release()
	if errors.Is(err, errBodyTimeout) {
		p.bodyTimedOut(w)
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "cannot read the request body: "+err.Error(), "invalid_request_error", 0)
		return
	}
	gen := generates(r.Method, r.URL.Path)
	streams, _ := r.Body.(*deadlineBody)
	if gen && streams == nil {
		p.generating.Add(1)
		defer p.generating.Add(-1)
	}
	b, err := p.acquire(r.Context(), nil)
	if err != nil {
		var h *errHeld
		switch {
		case errors.As(err, &h):
			p.reject(w, h)
			return
		case errors.Is(err, errCut):
			p.answerCut(w, p.cause(nil))
			return
		}
		clientGone() // nobody to answer
	}
	s := &slot{b: b, in: r.Body}
	switch {
	case gen && streams != nil:
		streams.onEnd = func() { s.beginLate(p) }
	case gen:
		s.work = b.beginWork()
	}
	answered := false // the answer went out whole (ServeHTTP panics on a cut stream)
	defer func() {
		// Only a generation that ended well counts: llama-server adds a
		// request's cycles to /metrics only then, and a cancelled or
		// failed request's time without its cycles would price the width
		// up.
		s.end(p, answered && r.Context().Err() == nil && s.status > 0 && s.status < 400)
		s.b.add(-1)
	}()
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), slotKey{}, s)))
	answered = true
}

// answeredHere answers a request the proxy answers itself, never an
// engine (its own pages, /health, a refused key before a body), and
// reports whether it did.
func (p *Proxy) answeredHere(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.URL.Path == StatusPath:
		if p.o.Status == nil {
			http.NotFound(w, r)
		} else if readOnly(w, r) && p.authorized(w, r) {
			p.o.Status.ServeHTTP(w, r)
		}
		return true
	case r.URL.Path == MetricsPath && p.o.Metrics != nil:
		if readOnly(w, r) && p.authorized(w, r) {
			writeMetrics(w, nil, p.o.Metrics())
		}
		return true
	case r.URL.Path == "/metrics" && r.Method == http.MethodHead && p.o.Metrics != nil:
		// A HEAD asks for headers alone: answered here, so that it never
		// waits on an engine (net/http drops the body of a HEAD answer).
		if p.authorized(w, r) {
			writeMetrics(w, nil, p.o.Metrics())
		}
		return true
	case r.URL.Path == "/metrics" && r.Method == http.MethodGet && p.o.Metrics != nil:
		if p.authorized(w, r) {
			p.metrics(w, r)
		}
		return true
	case r.URL.Path == "/health" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		// HEAD as GET, its body dropped by net/http: a hung engine
		// cannot hang either.
		p.health(w)
		return true
	case expectsContinue(r) && p.refusedAsLlama(r):
		// The client waits for 100 Continue before it sends its body:
		// reading the body (replayable) sent one, and the engine's 401
		// came after the whole body had streamed. The engine's own
		// answer, given before the body (net/http closes the connection
		// after it, as the body may follow all the same).
		secret.Unauthorized(w)
		return true
	}
	return false
}

// readOnly answers 405 with Allow: GET, HEAD to any other method on a
// page speclaunch serves itself (the status page, its own metrics), as the
// engine's own GET routes answer one: a DELETE or a POST got the whole
// page with 200.
func readOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed on "+r.URL.Path+"; use GET or HEAD", "invalid_request_error", 0)
	return false
}

// sayStalled logs a request the send timeout ended (its client stopped
// reading its answer), at most one line per burstEvery with the number of
// those it stands for. The request's context was cancelled with the
// connection, so its engine slot is free already.
func (p *Proxy) sayStalled(w *sendDeadline, r *http.Request) {
	waited := w.stalled()
	if waited == 0 {
		return
	}
	p.stalls.warn(p.o.Log, "proxy: a client stopped reading its answer: one write waited past the send timeout, so its request was ended and its connection closed; the engine's slot is free (docs/serving.md)",
		"path", r.URL.Path, "waited", waited.Round(time.Millisecond).String())
}

// clientGone ends a request whose client went away (or half-closed its
// side: Go ends the request's context on the read's EOF) with no answer:
// a handler that just returned made net/http send an empty 200, which a
// client that half-closed read as a success.
func clientGone() { panic(http.ErrAbortHandler) }

// stopping reports that speclaunch is stopping (Refuse or Close came).
func (p *Proxy) stopping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed || p.refuse
}

// authorized answers 401 as llama-server does when the engine has keys
// and the request carries none of them.
func (p *Proxy) authorized(w http.ResponseWriter, r *http.Request) bool {
	if secret.Authorized(r, p.keys()) {
		return true
	}
	secret.Unauthorized(w)
	return false
}

// keys are the engine's API keys (SetAPIKeys).
func (p *Proxy) keys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.o.APIKeys
}

// refusedAsLlama says the engine checks its keys as llama-server does and
// that check refuses r. vLLM guards only /v1 (and with its own 401 body),
// SGLang its own routes: a keyless POST /tokenize that vLLM serves would
// be refused here.
func (p *Proxy) refusedAsLlama(r *http.Request) bool {
	p.mu.Lock()
	keys, llama := p.o.APIKeys, p.o.LlamaKeyRule
	p.mu.Unlock()
	return llama && secret.Refused(r, keys)
}

// expectsContinue says the client waits for 100 Continue before it sends
// its body (net/http sends it at the body's first read).
func expectsContinue(r *http.Request) bool {
	return strings.EqualFold(strings.TrimSpace(r.Header.Get("Expect")), "100-continue")
}

// metrics answers GET /metrics: the serving engine's series, then
// speclaunch's own. Where the engine's are missing (none serves, its
// /metrics failed or took longer than MetricsTimeout) a comment line says
// why, in their place; an engine's 401 passes through.
func (p *Proxy) metrics(w http.ResponseWriter, r *http.Request) {
	own := p.o.Metrics()
	p.mu.Lock()
	b := p.cur
	if p.holding || p.closed || b == nil || b.out() {
		b = nil
	} else {
		b.add(1)
	}
	p.mu.Unlock()
	if b == nil {
		writeMetrics(w, missingLine("no engine serves now"), own)
		return
	}
	defer b.add(-1)
	bound := p.o.MetricsTimeout
	ctx, cancel := context.WithTimeout(r.Context(), bound)
	defer cancel()
	timedOut := func() bool { return errors.Is(ctx.Err(), context.DeadlineExceeded) }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL.String()+"/metrics", nil)
	if err != nil {
		writeMetrics(w, missingLine(seriesMissing(err, false, 0, bound)), own)
		return
	}
	// Only the key goes on, in either header the proxy takes it in: a
	// scraper's Accept-Encoding (Prometheus asks for gzip) or Accept
	// (OpenMetrics) would have the engine answer in a form speclaunch's
	// own series cannot be appended to.
	for _, h := range []string{"Authorization", "X-Api-Key"} {
		if a := r.Header.Get(h); a != "" {
			req.Header.Set(h, a)
		}
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := p.o.Transport.RoundTrip(req)
	if err != nil {
		writeMetrics(w, missingLine(seriesMissing(err, timedOut(), 0, bound)), own)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode == http.StatusUnauthorized {
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		w.Write(body)
		return
	}
	if why := seriesMissing(err, timedOut(), resp.StatusCode, bound); why != "" {
		body = missingLine(why)
	}
	writeMetrics(w, body, own)
}

// seriesMissing says why the engine's series are missing from GET /metrics
// ("" when they are there): err is the request's or its body's, status
// the engine's answer (0: none came), timedOut that bound ended the wait.
func seriesMissing(err error, timedOut bool, status int, bound time.Duration) string {
	switch {
	case timedOut:
		return fmt.Sprintf("its /metrics did not answer within %s", bound)
	case err != nil:
		return "its /metrics failed: " + err.Error()
	case status != http.StatusOK:
		return fmt.Sprintf("its /metrics answered HTTP %d", status)
	}
	return ""
}

// missingLine is the comment of the exposition that stands for the
// engine's missing series: a scrape that gets speclaunch's alone says why,
// not only by what it lacks. Prometheus skips comment lines.
func missingLine(why string) []byte {
	return []byte("# speclaunch: the engine's series are missing: " + strings.Join(strings.Fields(why), " ") + "\n")
}

// writeMetrics writes the engine's series (if any) and speclaunch's, each
// ending in a newline, as one Prometheus text exposition.
func writeMetrics(w http.ResponseWriter, engine, own []byte) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	if len(engine) > 0 {
		w.Write(engine)
		if engine[len(engine)-1] != '\n' {
			w.Write([]byte{'\n'})
		}
	}
	w.Write(own)
}

// health answers GET /health from the proxy's own state, never by waiting
// on an engine: 200 while an engine serves or one is being switched in,
// 503 "Loading model" before the first engine is ready (as llama-server
// answers while it loads), 503 once the launcher is stopping (readiness).
func (p *Proxy) health(w http.ResponseWriter) {
	p.mu.Lock()
	cur, holding, ready, refuse, closed := p.cur, p.holding, p.ready, p.refuse, p.closed
	p.mu.Unlock()
	switch {
	case refuse || closed:
		writeError(w, http.StatusServiceUnavailable, "speclaunch is stopping", "unavailable_error", 1)
	case cur != nil && !holding:
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		io.WriteString(w, `{"status":"ok"}`) // byte for byte llama-server's

	case ready:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "speclaunch": "switching"})
	default:
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, loadingBody)
	}
}

// loadingBody is llama-server's 503 body while it loads, byte for byte
// (its field order, no newline: the captured new-slowload-health-sequence,
// fakellama.LoadingBody), where writeError's order is code, message,
// type.
const loadingBody = `{"error":{"message":"Loading model","type":"unavailable_error","code":503}}`

// maxReplay is the largest request body kept in memory so that the
// request can be sent again to the next engine when its engine dies
// before answering. LLM requests are far below it.
const maxReplay = 8 << 20

func fullDuplex(w http.ResponseWriter) error {
	if err := http.NewResponseController(w).EnableFullDuplex(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

func (p *Proxy) reject(w http.ResponseWriter, h *errHeld) {
	p.rejected.Add(1)
	p.mu.Lock()
	hold := p.o.HoldTimeout
	p.mu.Unlock()
	writeError(w, http.StatusServiceUnavailable, h.why+"; retry shortly", "unavailable_error", retryAfter(hold, h.stopping))
}

// The Retry-After of a held request's 503 (docs/serving.md, "What a held
// request can get"): a tenth of the hold timeout, in whole seconds, within
// [retryAfterMin, retryAfterMax]; retryAfterMin while stopping.
const (
	retryAfterPart = 10 // the hold timeout over Retry-After
	retryAfterMin  = 1  // seconds
	retryAfterMax  = 30 // seconds
)

// retryAfter says when a client whose request was held past the hold
// timeout (or found the queue full) should come back: a switch's hold is
// worth waiting out in part, so a tenth of the hold timeout (12 s at the
// default 2m); while stopping, at once to another replica, as /health's
// Retry-After says.
func retryAfter(hold time.Duration, stopping bool) int {
	if stopping {
		return retryAfterMin
	}
	return min(max(int(hold/(retryAfterPart*time.Second)), retryAfterMin), retryAfterMax)
}

// upstreamError answers a request the engine failed (it died mid-request,
// or no engine could be reached in time).
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if bodyLate(r.Context()) {
		// A body streaming through ran past its deadline, which also
		// ends the request's context: the client is still there.
		p.bodyTimedOut(w)
		return
	}
	if r.Context().Err() != nil {
		clientGone() // nobody to answer
	}
	var h *errHeld
	if errors.As(err, &h) {
		p.reject(w, h)
		return
	}
	if netfail.Of(err) == netfail.Local {
		// Not the engine's failure: a retry soon may find descriptors
		// free again.
		p.rejected.Add(1)
		p.localFails.warn(p.o.Log, "proxy: cannot reach the engine: this process is out of resources; the request gets 503 and the engine keeps serving", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, "speclaunch could not reach the engine ("+publicCause(err)+" on speclaunch's side, not the engine's); retry shortly", "unavailable_error", 1)
		return
	}
	var on *Backend
	if s, _ := r.Context().Value(slotKey{}).(*slot); s != nil {
		on = s.b
	}
	if c := p.cause(on); c.What != "" {
		// Its engine was stopped, or exited with none to follow it, and
		// the request could not be sent again (its body streamed through,
		// or no engine came).
		p.answerCut(w, c)
		return
	}
	if bodyLeft(r.Context()) {
		// The engine stopped reading a body that streams through (a body
		// over the replay cap): the rest of it must not be read as the next
		// request on this connection.
		w.Header().Set("Connection", "close")
	}
	if bodyCut(r.Context(), err) {
		// No answer came (answerFirst passes one that did): the engine
		// closed the connection on the body. It exited if the runtime
		// marks it gone; else it may have refused the body's size.
		if s, _ := r.Context().Value(slotKey{}).(*slot); s != nil && p.waitGone(r.Context(), s.b, bodyCutGrace) {
			p.o.Log.Warn("proxy: the engine exited while the request body was still being sent", "engine", s.b.Name, "path", r.URL.Path, "body_bytes", r.ContentLength, "err", err)
			writeError(w, http.StatusBadGateway, "the engine exited while the request body was still being sent; the log has the details", "server_error", 0)
			return
		}
		p.o.Log.Warn("proxy: the engine closed the connection while the request body was still being sent, with no answer; it may have refused a body this large, or stopped", "path", r.URL.Path, "body_bytes", r.ContentLength, "err", err)
		writeError(w, http.StatusBadGateway, "the engine closed the connection while the request body was still being sent (it may have refused a body this large"+bodySize(r.ContentLength)+", or stopped); the log has the details", "server_error", 0)
		return
	}
	p.o.Log.Warn("proxy: engine request failed", "path", r.URL.Path, "err", err)
	writeError(w, http.StatusBadGateway, "the engine failed this request ("+publicCause(err)+"); the log has the details", "server_error", 0)
}

// bodyTimedOut answers a request whose body did not arrive within the
// body timeout, and closes its connection: the rest of the body must not
// be read as the next request.
func (p *Proxy) bodyTimedOut(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusRequestTimeout, fmt.Sprintf("the request body did not arrive within %v; send it whole, faster", p.o.BodyTimeout), "invalid_request_error", 0)
}

// publicCause is what a client is told of a failure between the proxy and
// the engine: the cause without the loopback addresses and ports behind
// the proxy, which the log keeps.
func publicCause(err error) string {
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		return errno.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timed out"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the engine closed the connection"
	}
	return "the connection to the engine failed"
}

// retrying sends a request again to the next backend when the dial to its
// backend is refused: no byte of it reached the engine, so the retry cannot
// duplicate work.
type retrying struct {
	p    *Proxy
	base http.RoundTripper
}

func (t *retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	s, _ := req.Context().Value(slotKey{}).(*slot)
	for attempt := 0; ; attempt++ {
		resp, err := t.base.RoundTrip(req)
		if err == nil {
			if s != nil {
				s.status = resp.StatusCode
			}
			return guardStream(resp, t.p, s), nil
		}
		if s == nil || attempt >= 8 || req.Context().Err() != nil {
			return resp, err
		}
		dead := s.b
		cause := netfail.Of(err)
		switch {
		case cause == netfail.Local:
			// speclaunch's own want (descriptors, ports), not the
			// engine's: this request fails (upstreamError's 503), the
			// engine keeps its traffic. A dial error of any other kind
			// marked the engine dead for good (load review of 088c135).
			return resp, err
		case cause == netfail.Refused && t.p.stopping():
			// speclaunch is stopping: no next engine will come, and the
			// request is answered 503 (acquire refuses it); the log says
			// so rather than "sending it to the next engine".
			dead.refused.Store(true)
			t.p.o.Log.Info("proxy: engine refused a connection while speclaunch stops; the request gets 503", "engine", dead.Name, "path", req.URL.Path)
		case cause == netfail.Refused:
			dead.refused.Store(true)
			t.p.o.Log.Info("proxy: engine refused a connection; sending the request to the next engine", "engine", dead.Name, "path", req.URL.Path)
		case req.GetBody != nil && t.p.waitGone(req.Context(), dead, goneGrace):
			// The engine died or hung before answering: the request had
			// no effect a client could see.
			if dead.last.Load() {
				// No engine follows it (GoneLast): acquire holds the
				// request until speclaunch closes the proxy: 503.
				t.p.o.Log.Info("proxy: the engine ended before answering and no engine follows it (speclaunch stops); the request gets 503", "engine", dead.Name, "path", req.URL.Path, "err", err)
				break
			}
			t.p.o.Log.Info("proxy: the engine ended before answering; sending the request to the next engine", "engine", dead.Name, "path", req.URL.Path, "err", err)
		default:
			return resp, err
		}
		nb, aerr := t.p.acquire(req.Context(), dead)
		if (aerr == errStopping || errors.Is(aerr, errCut)) && dead.last.Load() && t.p.cause(nil).What != "" {
			// No engine followed it and the proxy closed (while it waited,
			// errCut, or before it asked, errStopping): the client is told
			// why its engine left it (Close's cause, upstreamError), not
			// only that speclaunch stops.
			return nil, err
		}
		if aerr != nil {
			return nil, aerr
		}
		t.p.retried.Add(1) // only what reaches a next engine: a 503 here was not sent again
		s.mu.Lock()
		dead.endWork(s.work, false)
		dead.add(-1)
		s.b = nb
		if s.work.ok {
			s.work = nb.beginWork()
		}
		s.mu.Unlock()
		r2 := req.Clone(req.Context())
		r2.URL.Scheme, r2.URL.Host = nb.URL.Scheme, nb.URL.Host
		if req.GetBody != nil {
			if r2.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
		req = r2
	}
}

// goneGrace is how long a failed request waits to learn whether its
// engine is gone (the runtime notices an exit within milliseconds) before
// the failure is the client's answer.
const goneGrace = 3 * time.Second

// bodyCutGrace is goneGrace for a failure that only the answer's words
// wait on: a request whose body streamed through and was cut (it cannot
// be sent again: the engine exited, or it may have refused the body), and
// a stream cut mid-way (sseGuard: the engine exited, or failed). It is
// short because where the engine refused the body's size and serves on,
// or a stream broke on an engine that lives, the client waits all of it.
const bodyCutGrace = 500 * time.Millisecond

// waitGone reports whether b is marked gone within grace. Once the
// proxy is closed no engine will take the request: it stops waiting, so
// that the failure is answered before the listener's own grace ends (an
// engine stopped when the shutdown timeout passed, or at a second
// signal, is not marked gone, and its clients got an empty reply).
func (p *Proxy) waitGone(ctx context.Context, b *Backend, grace time.Duration) bool {
	t := time.NewTimer(grace)
	defer t.Stop()
	return p.goneBy(ctx, b, t.C)
}

// goneBy is waitGone until by fires.
func (p *Proxy) goneBy(ctx context.Context, b *Backend, by <-chan time.Time) bool {
	select {
	case <-b.gone:
		return true
	case <-by:
		return false
	case <-ctx.Done():
		return false
	case <-p.stopped:
		return false
	}
}

// cause says why a request on b ends unanswered when that is not b's own
// failure, the zero Cause otherwise: speclaunch stopped b under it
// (StopsWith, the more precise), or the proxy closed (Close's cause).
func (p *Proxy) cause(b *Backend) Cause {
	if c := b.stoppedWhy(); c.What != "" {
		return c
	}
	select {
	case <-p.stopped:
		return p.cut // written before stopped was closed
	default:
	}
	return Cause{}
}

// waitCut waits, within grace in all, to learn whether a failure on b is
// one that Close will give the cause of: b marked gone with no engine to
// follow it (GoneLast), which the runtime's Cut follows. An engine killed
// mid-stream breaks the stream before the runtime sees it exit, and its
// client read "the engine failed" where the queued requests were told it
// exited.
func (p *Proxy) waitCut(ctx context.Context, b *Backend, grace time.Duration) {
	if b == nil {
		return
	}
	p.o.Log.Debug("proxy: a stream broke; waiting to learn whether its engine exited", "engine", b.Name, "grace", grace.String())
	// One deadline for both waits: a mark that came late left the Cut
	// grace again, up to twice grace in all.
	t := time.NewTimer(grace)
	defer t.Stop()
	if !p.goneBy(ctx, b, t.C) || !b.last.Load() {
		return
	}
	select {
	case <-p.stopped:
	case <-t.C:
	case <-ctx.Done():
	}
}

// guardStream makes a server-sent-event stream that breaks mid-way end
// with an error event, never with a clean end that looks complete.
// s, when set, is the request's slot: the engine that answers it.
func guardStream(resp *http.Response, p *Proxy, s *slot) *http.Response {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp
	}
	g := &sseGuard{ReadCloser: resp.Body, p: p, ctx: resp.Request.Context()}
	if s != nil {
		g.b = s.b
	}
	resp.Body = g
	return resp
}

// sseGuard turns a read error of an event stream into a final error event.
type sseGuard struct {
	io.ReadCloser
	p    *Proxy          // its cause says why the stream was cut, when not the engine's failure
	ctx  context.Context // the request's
	b    *Backend        // the engine streaming; nil when unknown
	tail *bytes.Reader   // the error event, once the engine failed
}

func (g *sseGuard) Read(b []byte) (int, error) {
	if g.tail != nil {
		return g.tail.Read(b)
	}
	n, err := g.ReadCloser.Read(b)
	if err == nil || err == io.EOF || errors.Is(err, context.Canceled) {
		return n, err
	}
	var e APIError
	e.Error.Code, e.Error.Type = http.StatusBadGateway, "server_error"
	e.Error.Message = "the engine failed during this response (" + publicCause(err) + "); the output is incomplete"
	g.p.waitCut(g.ctx, g.b, bodyCutGrace)
	if c := g.p.cause(g.b); c.What != "" {
		// speclaunch stopped the engine with this stream under way, or
		// it exited and speclaunch stops: whoever stops it, or the
		// runtime's exit line, says so.
		e.Error.Code, e.Error.Type = http.StatusServiceUnavailable, "unavailable_error"
		e.Error.Message = c.at("during this response") + "; the output is incomplete"
	} else {
		g.p.o.Log.Warn("proxy: the engine failed mid-stream; ending the stream with an error event", "err", err)
	}
	body, _ := json.Marshal(e)
	g.tail = bytes.NewReader([]byte("\n\ndata: " + string(body) + "\n\n"))
	if n > 0 {
		return n, nil
	}
	return g.tail.Read(b)
}

// APIError is the OpenAI-style error body the engines answer with.
type APIError struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg, typ string, retryAfter int) {
	var e APIError
	e.Error.Code, e.Error.Message, e.Error.Type = code, msg, typ
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	}
	writeJSON(w, code, e)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// bufPool recycles the 32 KiB copy buffers of streamed responses.
type bufPool struct{}

var pool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufPool) Get() []byte  { return *(pool.Get().(*[]byte)) }
func (bufPool) Put(b []byte) { pool.Put(&b) }
