package sim

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// ExitError is an injected failure (--sim-fail-start, --sim-crash-after):
// the process running the sim should exit with Code.
type ExitError struct {
	Code   int
	Reason string
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("simulated %s (exit code %d)", e.Reason, e.Code)
}

// shutdownGrace bounds how long a clean stop waits for handlers to return;
// in-flight decodes are cancelled first, so it is rarely reached.
const shutdownGrace = 2 * time.Second

// Run serves the simulated engine until ctx is done, then shuts down and
// returns nil. Like mlxcel it does not bind the port until warm-up ends
// (connection refused meanwhile), unless cfg.Health503 asks for
// llama-server's 503 "Loading model" phase. All logging goes to stderr, as
// mlxcel's does; stdout stays empty. Injected failures return *ExitError.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	_ = stdout // mlxcel-server and llama-server print nothing on stdout
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("sim config: %w", err)
	}
	cfg = cfg.clone()
	clk := cfg.Clock
	if clk == nil {
		clk = SystemClock
	}
	log := &logger{w: stderr}
	log.printf("speclaunch sim: a simulated engine standing in for mlxcel-server; tokens are synthetic and its numbers are never a measurement")
	if cfg.FailStart {
		log.printf("Speculative decoding dispatch resolution failed: simulated start failure (--sim-fail-start) %s", simTag)
		return &ExitError{Code: cfg.ExitCode, Reason: "start failure"}
	}
	log.startup(cfg)

	s := newServer(cfg, clk, log)
	h := newHTTPServer(ctx, s.handler(), net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	defer h.stopServing()
	if cfg.Health503 {
		if err := h.listen(); err != nil {
			return err
		}
	}
	if err := clk.Sleep(ctx, cfg.Warmup); err != nil {
		if h.ln != nil {
			h.stop()
		}
		log.printf("Shutting down during warm-up %s", simTag)
		return nil
	}
	logDispatch(log, cfg)
	if h.ln == nil {
		if err := h.listen(); err != nil {
			return err
		}
	}
	s.ready.Store(true)
	log.printf("Server listening on http://%s (endpoints: /health /v1/models /v1/completions /v1/chat/completions /completion /metrics /props) %s", h.ln.Addr(), simTag)
	if cfg.onReady != nil {
		cfg.onReady(h.ln.Addr().String())
	}
	return h.serveUntil(ctx, cfg, clk, log)
}

// httpServer is the sim's listener and HTTP server. Requests run under a
// context of their own (serveCtx), cancelled on stop, so in-flight
// decodes end before the server shuts down.
type httpServer struct {
	srv         *http.Server
	addr        string
	ln          net.Listener // nil until listen
	serveCtx    context.Context
	stopServing context.CancelFunc
	serveErr    chan error
}

// newHTTPServer makes the server for handler on addr; nothing is bound
// until listen.
func newHTTPServer(ctx context.Context, handler http.Handler, addr string) *httpServer {
	h := &httpServer{addr: addr, serveErr: make(chan error, 1)}
	h.serveCtx, h.stopServing = context.WithCancel(context.WithoutCancel(ctx))
	h.srv = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return h.serveCtx },
	}
	return h
}

// listen binds the address and starts serving on it.
func (h *httpServer) listen() error {
	var err error
	if h.ln, err = net.Listen("tcp", h.addr); err != nil {
		return fmt.Errorf("listen on %s: %w", h.addr, err)
	}
	go func() { h.serveErr <- h.srv.Serve(h.ln) }()
	return nil
}

// stop cancels in-flight decodes, then shuts the server down, closing it
// when that takes longer than shutdownGrace.
func (h *httpServer) stop() {
	h.stopServing() // cancels in-flight decodes through their request contexts
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if h.srv.Shutdown(sctx) != nil {
		h.srv.Close()
	}
}

// serveUntil serves until ctx is done (a clean stop, nil), the server
// fails, or the injected crash (cfg.CrashAfter) comes due (*ExitError).
func (h *httpServer) serveUntil(ctx context.Context, cfg Config, clk Clock, log *logger) error {
	crash := make(chan struct{})
	if cfg.CrashAfter > 0 {
		go func() {
			if clk.Sleep(h.serveCtx, cfg.CrashAfter) == nil {
				close(crash)
			}
		}()
	}
	select {
	case <-ctx.Done():
		log.printf("Shutting down %s", simTag)
		h.stop()
		return nil
	case err := <-h.serveErr:
		h.stopServing()
		return fmt.Errorf("serve: %w", err)
	case <-crash:
		log.printf("speclaunch sim: injected crash after %v (exit code %d)", cfg.CrashAfter, cfg.ExitCode)
		h.stopServing()
		h.srv.Close()
		return &ExitError{Code: cfg.ExitCode, Reason: "crash"}
	}
}

// logDispatch prints what mlxcel prints after warm-up about speculative
// dispatch: declined, or the exactness probe passed.
func logDispatch(log *logger, cfg Config) {
	w, _ := cfg.ResolveBlockSize()
	if w <= 0 {
		return
	}
	if cfg.Decline {
		log.printf("MTP declined: simulated decline. Falling back to classic decode. block_size=%d", w)
		log.printf("Speculative dispatch after warm-up: speculative=off (declined) %s", simTag)
		return
	}
	log.printf("MTP exactness probe passed: verify block is byte-identical to the single-token chain block_size=%d %s", w, simTag)
}

// NewHandler returns a ready simulated engine as an http.Handler, with no
// warm-up, process or listener, for tests that run an engine in-process
// (httptest.NewServer). Its log lines go to stderr.
func NewHandler(cfg Config, stderr io.Writer) (http.Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("sim config: %w", err)
	}
	cfg = cfg.clone()
	clk := cfg.Clock
	if clk == nil {
		clk = SystemClock
	}
	s := newServer(cfg, clk, &logger{w: stderr})
	s.ready.Store(true)
	return s.handler(), nil
}
