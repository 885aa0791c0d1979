package adaptsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/speclaunch/speclaunch/internal/adapt"
)

// Loop is internal/adapt's Loop (today's loop) as a Controller: its own
// goroutine runs Loop.Run as serve does, against this harness through an
// in-process http.RoundTripper (its /metrics, /props and /completion
// probes; no socket) and a Switch that returns when the harness says the
// new engine serves; the two goroutines hand over in lockstep, so a run
// is as deterministic as the harness. Cfg's Interval only paces the
// loop's ticker in wall time (1 µs here); what it measures is virtual.
func Loop(cfg adapt.Config) Factory {
	return func(p Profile) Controller {
		cfg := cfg
		cfg.Interval = time.Microsecond
		return &loopCtl{cfg: cfg, pair: p.Name}
	}
}

// probePrefix is the prompt prefix the loop's probe caches (adapt's
// probePrefixLen): a probe of w rows sends it and w fresh tokens.
const probePrefix = 64

type loopEvent struct {
	kind   int // evScrape: the loop wants the next scrape; evSwitch; evExit
	width  int
	reason string
}

const (
	evScrape = iota
	evSwitch
	evExit
)

type loopCtl struct {
	cfg  adapt.Config
	pair string
	env  Env

	mu   sync.Mutex
	last Scrape // the serving engine as last seen

	ctx        context.Context
	cancel     context.CancelFunc
	events     chan loopEvent
	snaps      chan Scrape
	switchDone chan error
	exited     chan struct{}
	pending    bool
	dead       bool
	loop       *adapt.Loop
}

func (c *loopCtl) Start(env Env, s Scrape) []Command {
	c.env, c.last = env, s
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.events, c.snaps, c.switchDone, c.exited = make(chan loopEvent), make(chan Scrape), make(chan error), make(chan struct{})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if env.Log != nil {
		log = slog.New(slog.NewTextHandler(logWriter(env.Log), &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: dropTime}))
	}
	l := adapt.New(adapt.LoopDeps{Current: c.current, Switch: c.switchTo, HTTP: &http.Client{Transport: c}, Log: log, Now: c.now, Cfg: c.cfg})
	c.loop = l
	go func() {
		defer close(c.exited)
		_ = l.BeforeTraffic(c.ctx, c.current()) // the runtime, before the first request
		err := l.Run(c.ctx)
		if err != nil && c.env.Log != nil {
			c.env.Log("the loop ended: " + err.Error())
		}
		c.send(loopEvent{kind: evExit})
	}()
	return c.wait()
}

func (c *loopCtl) Scrape(s Scrape) []Command {
	if c.dead || c.pending {
		return nil // the loop is in a switch (it does not scrape then), or gone
	}
	c.setLast(s)
	c.snaps <- s
	return c.wait()
}

func (c *loopCtl) Switched(s Scrape, _ time.Duration) []Command {
	c.setLast(s)
	if !c.pending {
		return nil
	}
	c.pending = false
	c.switchDone <- nil
	return c.wait()
}

func (c *loopCtl) Close() {
	c.cancel()
	<-c.exited
}

// wait is the harness's side of the lockstep: it returns once the loop
// asks for its next scrape, asks for a switch, or has ended.
func (c *loopCtl) wait() []Command {
	for {
		ev := <-c.events
		switch ev.kind {
		case evScrape:
			return nil
		case evExit:
			c.dead = true
			return nil
		}
		if ev.width == c.snapshot().Width {
			c.switchDone <- fmt.Errorf("%w: width %d serves already", adapt.ErrSwitchDropped, ev.width)
			continue
		}
		c.pending = true
		return []Command{{Switch: ev.width, Reason: ev.reason}}
	}
}

func (c *loopCtl) send(ev loopEvent) bool {
	select {
	case c.events <- ev:
		return true
	case <-c.ctx.Done():
		return false
	}
}

func (c *loopCtl) setLast(s Scrape) {
	c.mu.Lock()
	c.last = s
	c.mu.Unlock()
}

func (c *loopCtl) snapshot() Scrape {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

func (c *loopCtl) now() time.Time { return c.snapshot().Now }

func (c *loopCtl) current() adapt.Target {
	s := c.snapshot()
	t := adapt.Target{BaseURL: "http://adaptsim", Width: s.Width, Gen: s.Engine, Pair: c.pair, Shared: s.Shared}
	withServed(&t, c.snapshot)
	return t
}

// switchTo is LoopDeps.Switch: it asks the harness and blocks until the
// new engine serves, which is then probed before traffic, as serve's
// runtime does.
func (c *loopCtl) switchTo(ctx context.Context, width int, reason string) error {
	if !c.send(loopEvent{kind: evSwitch, width: width, reason: reason}) {
		return ctx.Err()
	}
	select {
	case err := <-c.switchDone:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	_ = c.loop.BeforeTraffic(ctx, c.current())
	return nil
}

// RoundTrip answers the loop's requests to the engine.
func (c *loopCtl) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	switch req.URL.Path {
	case "/metrics":
		if !c.send(loopEvent{kind: evScrape}) {
			return nil, c.ctx.Err()
		}
		select {
		case s := <-c.snaps:
			return reply(http.StatusOK, metricsText(s)), nil
		case <-c.ctx.Done():
			return nil, c.ctx.Err()
		}
	case "/props":
		return reply(http.StatusOK, fmt.Sprintf(`{"total_slots":%d}`, max(1, c.env.Slots))), nil
	case "/completion":
		var body struct{ Prompt []int }
		if err := json.NewDecoder(io.LimitReader(req.Body, 1<<20)).Decode(&body); err != nil {
			return reply(http.StatusBadRequest, `{"error":"not JSON"}`), nil
		}
		rows := max(1, len(body.Prompt)-probePrefix)
		return reply(http.StatusOK, fmt.Sprintf(`{"timings":{"prompt_n":%d,"prompt_ms":%g}}`, rows, c.env.Probe(rows))), nil
	}
	return reply(http.StatusNotFound, "not found"), nil
}

func reply(code int, body string) *http.Response {
	return &http.Response{StatusCode: code, Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}
}

// metricsText is a scrape as llama-server's /metrics families (the ones
// internal/adapt reads).
func metricsText(s Scrape) string {
	var b strings.Builder
	k := s.Counters
	fmt.Fprintf(&b, "llamacpp:tokens_predicted_total %g\nllamacpp:tokens_predicted_seconds_total %g\n", k.Tokens, k.EngineSecs)
	fmt.Fprintf(&b, "llamacpp:n_decode_total %g\nllamacpp:requests_processing %g\n", k.Decodes, s.Processing)
	if s.Width >= 2 {
		fmt.Fprintf(&b, "llamacpp:spec_decode_num_drafts_total %g\nllamacpp:spec_decode_num_draft_tokens_total %g\n", k.Cycles, k.Drafted)
		fmt.Fprintf(&b, "llamacpp:spec_decode_num_accepted_tokens_total %g\n", k.Accepted)
		for p := range s.Width - 1 {
			v := 0.0
			if p < len(k.AtLeast) {
				v = k.AtLeast[p]
			}
			fmt.Fprintf(&b, "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"%d\"} %g\n", p, v)
		}
	}
	return b.String()
}

// logWriter hands each slog line to log.
type logWriter func(string)

func (f logWriter) Write(p []byte) (int, error) {
	f(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
