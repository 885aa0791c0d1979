// Package adapteval measures `serve --adapt` from the outside, the way an
// operator sees it: a bounded closed-loop load of a prompt set sent through
// the front proxy while /speclaunch/status is polled. Phase 1 runs until
// the adaptive loop has decided and settled (or a timeout), recording each
// width switch with the seconds and requests until it; phase 2 measures the
// aggregate client tokens/s at the settled width, without stopping the
// load in between, so the engine never sees an idle gap.
//
// scripts/adapteval is its command line; docs/bench.md ("Measuring
// `serve --adapt`") says how to run it.
package adapteval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/speclaunch/speclaunch/internal/loadgen"
	"github.com/speclaunch/speclaunch/internal/safefile"
)

// Options describe one measurement.
type Options struct {
	URL       string   // the public URL of serve --adapt (the proxy)
	Prompts   []Prompt // rotated across requests
	Clients   int      // concurrent clients (default 1)
	MaxTokens int      // default 128
	// LengthSpread varies max_tokens by prompt (loadgen.Options.Spread):
	// at one length, clients that start together stay in step at classic
	// decoding, which no server's traffic does.
	LengthSpread float64
	Temperature  float64 // 0 = greedy (sent explicitly: llama-server's default is 0.8)
	Seed         int     // with Temperature > 0: request seed = Seed + prompt index
	// SettleTimeout bounds phase 1 (default 5m); Measure or Requests bound
	// phase 2 (default 60s).
	SettleTimeout time.Duration
	Measure       time.Duration
	Requests      int
	Poll          time.Duration // status poll period (default 500ms)
	Client        *http.Client
	Progress      io.Writer // one line per switch and phase; may be nil
	// Direct adds phase 3: the same load, as long, sent straight to the
	// engine (engine.url of /speclaunch/status, on loopback: run on the
	// server's host), for the proxy's cost at the same width.
	Direct bool
	// Fixed, when above 0, measures a server at a fixed width (serve
	// without --adapt): phase 1 is a warm-up of this length under the
	// same load instead of waiting for a loop to settle. One such run per
	// width is the oracle of the adaptive run's own traffic: at 4 clients
	// on an H200 (2026-12-03) llama-server ran speculative widths about
	// 1.6x slower under these out-of-step clients than under bench's
	// identical requests in step, so bench's sweep was no oracle there.
	Fixed time.Duration
}

// Prompt is one prompt file.
type Prompt struct {
	Name string `json:"name"`
	Text string `json:"-"`
}

// Switch is one adapt switch from /speclaunch/status, placed on the load's
// timeline.
type Switch struct {
	From    int     `json:"from_width"`
	To      int     `json:"to_width"`
	Reason  string  `json:"reason"`
	Explore bool    `json:"explore"` // an exploration, not a decision
	OK      bool    `json:"ok"`
	TookMS  float64 `json:"took_ms"`
	// AtS is the server's switch time less the load's start (negative:
	// before the load, e.g. the first exploration); this assumes the
	// server and this client share a clock (run it on the same host).
	AtS float64 `json:"at_s"`
	// RequestsBefore counts requests completed before AtS.
	RequestsBefore int `json:"requests_before"`
	// SeenS is when a status poll first showed it (client clock).
	SeenS float64 `json:"seen_s"`
}

// Measured is phase 2.
type Measured struct {
	Seconds   float64 `json:"seconds"`
	Requests  int     `json:"requests"` // completed in the window
	Tokens    int64   `json:"tokens"`   // streamed chunks with text that arrived in the window
	TokPerSec float64 `json:"tokens_per_s"`
	// The engine's own per-request decode rate (timings.predicted_per_second)
	// over the requests that finished in the window and carried one; a
	// single request's rate, not the aggregate.
	EngineSamples      int     `json:"engine_samples"`
	EngineMeanPerSec   float64 `json:"engine_predicted_per_second_mean,omitempty"`
	EngineMedianPerSec float64 `json:"engine_predicted_per_second_median,omitempty"`
	Width              int     `json:"width_at_end"`
	SwitchesDuring     int     `json:"switches_during"` // adapt switches in the window: should be 0
}

// Result is what -out holds.
type Result struct {
	URL          string    `json:"url"`
	Started      time.Time `json:"started"`
	PromptDir    string    `json:"prompt_dir,omitempty"`
	Prompts      []Prompt  `json:"prompts"`
	Clients      int       `json:"clients"`
	MaxTokens    int       `json:"max_tokens"`
	LengthSpread float64   `json:"length_spread,omitempty"`
	Temperature  float64   `json:"temperature"`
	Seed         *int      `json:"seed,omitempty"`

	// Fixed: a fixed-width measurement (Options.Fixed); Settled then
	// means the width did not change from the warm-up to the end.
	Fixed          bool     `json:"fixed,omitempty"`
	Settled        bool     `json:"settled"`
	SettleNote     string   `json:"settle_note"`
	SettleS        float64  `json:"settle_s"`
	SettleRequests int      `json:"settle_requests"`
	Width          int      `json:"width"` // the engine's width when settled
	WidthSource    string   `json:"width_source"`
	Switches       []Switch `json:"switches"`
	Measure        Measured `json:"measure"`

	Load   loadgen.Result `json:"load"`
	Failed int            `json:"failed"`
	Empty  int            `json:"empty"`
	// Adapt is the final /speclaunch/status "adapt" object, as served.
	Adapt json.RawMessage `json:"adapt"`

	// With Options.Direct: phase 3, and the proxy's cost,
	// 1 − tokens_per_s through the proxy / tokens_per_s direct.
	Direct     *Measured       `json:"direct,omitempty"`
	DirectLoad *loadgen.Result `json:"direct_load,omitempty"`
	ProxyCost  *float64        `json:"proxy_cost,omitempty"`
	// DirectNote says why there is no proxy cost, when there is none.
	DirectNote string `json:"direct_note,omitempty"`
}

// OK: settled, and no request failed or came back empty.
func (r Result) OK() bool { return r.Settled && r.Failed == 0 && r.Empty == 0 }

// Summary is the one-line human account.
func (r Result) Summary() string {
	var b strings.Builder
	switch {
	case r.Fixed && r.Settled:
		fmt.Fprintf(&b, "fixed width %d (%s), warmed up for %.1fs and %d requests", r.Width, r.WidthSource, r.SettleS, r.SettleRequests)
	case r.Settled:
		fmt.Fprintf(&b, "settled at width %d (%s) after %.1fs and %d requests", r.Width, r.WidthSource, r.SettleS, r.SettleRequests)
	default:
		fmt.Fprintf(&b, "NOT settled (%s); width %d (%s) after %.1fs and %d requests", r.SettleNote, r.Width, r.WidthSource, r.SettleS, r.SettleRequests)
	}
	var hops []string
	for _, s := range r.Switches {
		h := fmt.Sprintf("%d→%d@%.1fs/%dreq", s.From, s.To, s.AtS, s.RequestsBefore)
		if s.Explore {
			h += "(explore)"
		}
		if !s.OK {
			h += "(failed)"
		}
		hops = append(hops, h)
	}
	if len(hops) == 0 {
		hops = []string{"none"}
	}
	fmt.Fprintf(&b, "; switches %s; then %.1f tok/s over %.1fs (%d requests, %d clients)",
		strings.Join(hops, " "), r.Measure.TokPerSec, r.Measure.Seconds, r.Measure.Requests, r.Clients)
	if r.Measure.SwitchesDuring > 0 {
		fmt.Fprintf(&b, ", %d switches during it", r.Measure.SwitchesDuring)
	}
	if r.Direct != nil {
		fmt.Fprintf(&b, "; direct %.1f tok/s", r.Direct.TokPerSec)
		if r.ProxyCost != nil {
			fmt.Fprintf(&b, " (proxy cost %.1f%%)", 100**r.ProxyCost)
		} else if r.DirectNote != "" {
			fmt.Fprintf(&b, " (%s)", r.DirectNote)
		}
	}
	fmt.Fprintf(&b, "; failed %d, empty %d", r.Failed, r.Empty)
	return b.String()
}

// MaxPromptBytes caps one prompt file, MaxPrompts a directory.
const (
	MaxPromptBytes = safefile.PromptLimit
	MaxPrompts     = 256
)

// ReadPrompts reads every entry of dir not starting with "." as one prompt,
// in name order: each must be a regular file of non-empty UTF-8 text of at
// most MaxPromptBytes (internal/bench/prompts/code and prose are such sets).
func ReadPrompts(ctx context.Context, dir string) ([]Prompt, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("prompt directory: %w (give a directory of prompt files, e.g. internal/bench/prompts/code)", err)
	}
	var out []Prompt
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if len(out) == MaxPrompts {
			return nil, fmt.Errorf("prompt directory %s holds more than %d prompts", dir, MaxPrompts)
		}
		p := filepath.Join(dir, e.Name())
		b, err := safefile.ReadFile(ctx, "prompt file", p, MaxPromptBytes)
		if err != nil {
			return nil, err
		}
		switch {
		case strings.TrimSpace(string(b)) == "":
			return nil, fmt.Errorf("prompt file %s is empty", p)
		case !utf8.Valid(b):
			return nil, fmt.Errorf("prompt file %s is not UTF-8 text", p)
		}
		out = append(out, Prompt{Name: e.Name(), Text: string(b)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("prompt directory %s holds no prompt files", dir)
	}
	return out, nil
}

func (o *Options) defaults() error {
	if o.URL == "" {
		return errors.New("no server URL: give the URL of a running `speclaunch serve --adapt`")
	}
	if len(o.Prompts) == 0 {
		return errors.New("no prompts: give a prompt directory")
	}
	if o.Clients <= 0 {
		o.Clients = 1
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 128
	}
	if o.Temperature < 0 {
		return fmt.Errorf("temperature %g is negative", o.Temperature)
	}
	if o.SettleTimeout <= 0 {
		o.SettleTimeout = 5 * time.Minute
	}
	if o.Measure <= 0 && o.Requests <= 0 {
		o.Measure = 60 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.Client == nil {
		// A connection per request, as loadgen's default and the proxy's
		// (phase 3 talks to the engine directly; docs/engines.md says why).
		o.Client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	}
	return nil
}

// Run measures. An error means no measurement (bad options, a server that
// is not `serve --adapt`, or one whose loop stopped adapting); a Result
// with Settled false or failed requests is a measurement that did not pass.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.defaults(); err != nil {
		return Result{}, err
	}
	r := Result{URL: o.URL, Prompts: o.Prompts, Clients: o.Clients, MaxTokens: o.MaxTokens, LengthSpread: o.LengthSpread, Temperature: o.Temperature}
	st, err := getStatus(ctx, o)
	if err != nil {
		return r, err
	}
	if err := o.ready(ctx, &st); err != nil {
		return r, err
	}
	if o.Temperature > 0 {
		seed := o.Seed
		r.Seed = &seed
	}
	e := &evalRun{o: o, r: &r, seen: map[string]bool{}, live: &loadgen.Live{}, stop: make(chan struct{}), loadDone: make(chan loadgen.Result, 1)}
	lctx, cancelLoad := context.WithCancel(ctx)
	defer cancelLoad()
	e.startLoad(lctx)
	e.track(st)
	if o.Fixed > 0 {
		st, err = e.warmUp(ctx, st)
	} else {
		st, err = e.settle(ctx, st)
	}
	if err != nil {
		return r, err
	}
	if st, err = e.measure(ctx, st); err != nil {
		return r, err
	}
	if o.Fixed > 0 && r.Measure.Width != r.Width {
		r.Settled = false
		r.SettleNote = fmt.Sprintf("the width changed during the measurement: %d, then %d", r.Width, r.Measure.Width)
	}
	r.Adapt = st.Adapt
	if o.Direct {
		if err := o.direct(ctx, &r, st, e.lo); err != nil {
			return r, err
		}
	}
	return r, nil
}

// ready checks that the server can be measured the way o asks: a loop
// that adapts (waiting out its probe before traffic: load sent now would
// queue behind the probe and distort it), or with Fixed a server that
// serves one width and has no loop that could change it.
func (o Options) ready(ctx context.Context, st *status) error {
	if o.Fixed > 0 {
		if a, ok := st.adapt(); ok && a.State != "not adapting" && a.State != "stopped" {
			return fmt.Errorf("-fixed measures one width, and this server's adaptive loop is %s: start it without --adapt, at the width to measure (--draft-block-size W)", a.State)
		}
		if st.Engine == nil || st.Engine.Width < 1 {
			return errors.New("-fixed: /speclaunch/status names no engine serving a width")
		}
		return nil
	}
	if err := st.adapting(); err != nil {
		return err
	}
	next, err := o.waitProbe(ctx, *st)
	*st = next
	return err
}

// warmUp is phase 1 of a fixed-width run: the load runs for Fixed, and
// until as many requests as clients have ended (within SettleTimeout), so
// the window measures a warm engine with its clients out of step. A
// warm-up that no request finished warmed nothing: under load a 50 ms one
// ended before the first request did.
func (e *evalRun) warmUp(ctx context.Context, st status) (status, error) {
	o, r := e.o, e.r
	r.Fixed = true
	o.progress("phase 1: %d clients, %d prompts, max_tokens %d, warming up a fixed width for %s", o.Clients, len(o.Prompts), o.MaxTokens, o.Fixed)
	wait, until := o.Fixed, e.start.Add(o.SettleTimeout)
	for {
		select {
		case <-ctx.Done():
			e.finish()
			return st, ctx.Err()
		case <-time.After(wait):
		}
		if e.before(time.Now()) >= o.Clients || time.Now().After(until) {
			break
		}
		wait = o.Poll
	}
	if st2, err := getStatus(ctx, o); err == nil {
		st = st2
		e.track(st)
	}
	if st.Engine == nil {
		e.finish()
		return st, errors.New("-fixed: /speclaunch/status names no engine after the warm-up")
	}
	r.Settled = true
	r.SettleNote = fmt.Sprintf("fixed width %d, warmed up for %s", st.Engine.Width, o.Fixed)
	return st, nil
}

// evalRun is one Run's load and what it has seen: when each request
// ended, the samples of the measuring window, the switches already
// recorded.
type evalRun struct {
	o        Options
	r        *Result
	lo       loadgen.Options
	start    time.Time
	live     *loadgen.Live
	stop     chan struct{}
	loadDone chan loadgen.Result
	seen     map[string]bool // switches already in r.Switches

	mu    sync.Mutex
	ends  []time.Time
	inWin []loadgen.Sample
	win   bool // phase 2's window is open
}

// startLoad starts the closed-loop load that runs through phases 1 and 2
// without a pause; the load's start is the timeline's zero.
func (e *evalRun) startLoad(ctx context.Context) {
	o := e.o
	prompts := make([]string, len(o.Prompts))
	for i, p := range o.Prompts {
		prompts[i] = p.Text
	}
	e.lo = loadgen.Options{URL: o.URL, Clients: o.Clients, Duration: o.SettleTimeout + o.Measure + time.Hour, Stream: true,
		MaxTokens: o.MaxTokens, Spread: o.LengthSpread, Prompts: prompts, Params: map[string]any{"temperature": o.Temperature},
		Stop: e.stop, Live: e.live, Client: o.Client, OnDone: e.done}
	// Seeds differ per prompt and repeat per prompt, so a prompt's sampled
	// text is the same every time it comes round (as greedy text is).
	if o.Temperature > 0 {
		e.lo.Seeds = make([]int, len(prompts))
		for i := range e.lo.Seeds {
			e.lo.Seeds[i] = o.Seed + i
		}
	}
	e.r.Started = time.Now()
	e.start = e.r.Started
	go func() {
		res, _ := loadgen.Run(ctx, e.lo)
		e.loadDone <- res
	}()
}

// done records one finished request.
func (e *evalRun) done(s loadgen.Sample) {
	e.mu.Lock()
	e.ends = append(e.ends, s.End)
	if e.win {
		e.inWin = append(e.inWin, s)
	}
	e.mu.Unlock()
}

// finish stops the load and counts its failures.
func (e *evalRun) finish() {
	close(e.stop)
	e.r.Load = <-e.loadDone
	e.r.Failed, e.r.Empty = e.r.Load.Failed, e.r.Load.Empty+e.r.Load.Cut
}

// before counts the requests that ended before t.
func (e *evalRun) before(t time.Time) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, end := range e.ends {
		if end.Before(t) {
			n++
		}
	}
	return n
}

// track adds the status's adapt switches not seen before to the result,
// placed on the load's timeline.
func (e *evalRun) track(st status) {
	for _, s := range st.Switches {
		if s.Kind != "adapt" {
			continue
		}
		key := s.At.Format(time.RFC3339Nano) + fmt.Sprint(s.From, s.To)
		if e.seen[key] {
			continue
		}
		e.seen[key] = true
		sw := Switch{From: s.From, To: s.To, Reason: s.Reason, Explore: isExplore(s.Reason), OK: s.OK, TookMS: s.TookMS,
			AtS: s.At.Sub(e.start).Seconds(), RequestsBefore: e.before(s.At), SeenS: time.Since(e.start).Seconds()}
		e.r.Switches = append(e.r.Switches, sw)
		e.o.progress("switch %d→%d at %.1fs after %d requests (%s)", sw.From, sw.To, sw.AtS, sw.RequestsBefore, sw.Reason)
	}
}

// settle is phase 1: poll the status until the adaptive loop has settled
// or SettleTimeout has passed. It returns the last status read; on an
// error the load is already stopped.
func (e *evalRun) settle(ctx context.Context, st status) (status, error) {
	o, r := e.o, e.r
	o.progress("phase 1: %d clients, %d prompts, max_tokens %d, until the adaptive loop settles (at most %s)", o.Clients, len(o.Prompts), o.MaxTokens, o.SettleTimeout)
	settleBy := e.start.Add(o.SettleTimeout)
	tick := time.NewTicker(o.Poll)
	defer tick.Stop()
	failedPolls := 0
	var c calm
	for {
		if ctx.Err() != nil {
			e.finish()
			return st, ctx.Err()
		}
		st2, err := getStatus(ctx, o)
		if err != nil {
			if failedPolls++; failedPolls*int(o.Poll/time.Millisecond) > 30000 {
				e.finish()
				return st, fmt.Errorf("status unreadable for 30s: %w", err)
			}
		} else {
			failedPolls = 0
			st = st2
			e.track(st)
			if err := st.adapting(); err != nil {
				e.finish()
				return st, err
			}
			ok, note := c.next(st)
			r.SettleNote = note
			if ok {
				r.Settled = true
				return st, nil
			}
		}
		if time.Now().After(settleBy) {
			r.SettleNote = fmt.Sprintf("timed out after %s: %s", o.SettleTimeout, r.SettleNote)
			return st, nil
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}

// measure closes phase 1 now (its seconds, requests and width) and is
// phase 2: the load goes on and the window opens at once, for Measure or
// Requests. It stops the load and returns the last status.
func (e *evalRun) measure(ctx context.Context, st status) (status, error) {
	o, r := e.o, e.r
	t0 := time.Now()
	r.SettleS = t0.Sub(e.start).Seconds()
	r.SettleRequests = e.before(t0)
	if st.Engine != nil {
		r.Width, r.WidthSource = st.Engine.Width, st.Engine.WidthSource
	}
	o.progress("phase 1 done: %s after %.1fs; width %d", r.SettleNote, r.SettleS, r.Width)

	e.mu.Lock()
	e.win = true
	e.mu.Unlock()
	tok0, done0 := e.live.Tokens.Load(), e.live.Done.Load()
	nsw := len(r.Switches)
	o.progress("phase 2: measuring for %s", o.describeMeasure())
	endBy := t0.Add(o.Measure)
	for {
		if ctx.Err() != nil {
			e.finish()
			return st, ctx.Err()
		}
		if o.Measure > 0 && !time.Now().Before(endBy) || o.Requests > 0 && e.live.Done.Load()-done0 >= int64(o.Requests) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(o.Poll, 100*time.Millisecond)):
		}
		if st2, err := getStatus(ctx, o); err == nil {
			st = st2
			e.track(st)
		}
	}
	t1 := time.Now()
	tok1, done1 := e.live.Tokens.Load(), e.live.Done.Load()
	e.mu.Lock()
	e.win = false
	samples := slices.Clone(e.inWin)
	e.mu.Unlock()
	e.finish()
	if st2, err := getStatus(ctx, o); err == nil {
		st = st2
		e.track(st)
	}
	m := Measured{Seconds: t1.Sub(t0).Seconds(), Requests: int(done1 - done0), Tokens: tok1 - tok0, SwitchesDuring: len(r.Switches) - nsw}
	if m.Seconds > 0 {
		m.TokPerSec = float64(m.Tokens) / m.Seconds
	}
	var rates []float64
	for _, s := range samples {
		if !s.End.After(t1) && s.EnginePerSecond > 0 {
			rates = append(rates, s.EnginePerSecond)
		}
	}
	m.engine(rates)
	if st.Engine != nil {
		m.Width = st.Engine.Width
	}
	r.Measure = m
	return st, nil
}

// direct is phase 3: the phase-2 load straight at the engine, for the
// proxy's cost at the same width.
func (o Options) direct(ctx context.Context, r *Result, st status, lo loadgen.Options) error {
	// The engine serving now: phase 2's last status may predate a switch.
	if now, err := getStatus(ctx, o); err == nil && now.Engine != nil {
		st = now
	}
	if st.Engine == nil || st.Engine.URL == "" {
		return errors.New("-direct: /speclaunch/status names no engine URL")
	}
	o.progress("phase 3: the same load straight at the engine (%s)", st.Engine.URL)
	m, rates, res, replaced := o.directWindow(ctx, st, lo)
	r.DirectLoad = &res
	if replaced {
		// Requests to the retired engine fail by design; they are no
		// failure of serving, and the window is no measurement of it.
		m.SwitchesDuring = 1
		r.Direct = &m
		r.DirectNote = "the loop replaced the engine during the direct window; no proxy cost"
		o.progress("phase 3: %s", r.DirectNote)
		return ctx.Err()
	}
	r.Failed, r.Empty = r.Failed+res.Failed, r.Empty+res.Empty+res.Cut
	if m.Seconds > 0 {
		m.TokPerSec = float64(m.Tokens) / m.Seconds
	}
	m.engine(rates)
	if end, err := getStatus(ctx, o); err == nil && end.Engine != nil {
		m.Width = end.Engine.Width
		if end.Engine.URL != st.Engine.URL {
			m.SwitchesDuring = 1 // the engine changed under the direct load
		}
	}
	r.Direct = &m
	switch {
	case m.SwitchesDuring > 0:
		r.DirectNote = "the engine changed under the direct load; no proxy cost"
	case r.Measure.SwitchesDuring > 0:
		r.DirectNote = "the width changed during phase 2; no proxy cost at one width"
	case m.TokPerSec > 0:
		c := 1 - r.Measure.TokPerSec/m.TokPerSec
		r.ProxyCost = &c
	}
	return ctx.Err()
}

// directWindow runs lo against st's engine and counts one window: it
// opens once every client has finished one request (phase 2's opened with
// the load already running), lasts as long as phase 2's, and closes early
// when the loop replaces the engine (a re-exploration: the load would then
// measure a retired port). It returns the window's counts and engine
// rates, and the whole load's result.
func (o Options) directWindow(ctx context.Context, st status, lo loadgen.Options) (m Measured, rates []float64, res loadgen.Result, replaced bool) {
	live, stop := &loadgen.Live{}, make(chan struct{})
	lo.URL, lo.Live, lo.Stop = st.Engine.URL, live, stop
	var mu sync.Mutex
	win := false
	lo.OnDone = func(s loadgen.Sample) {
		mu.Lock()
		if win && s.EnginePerSecond > 0 {
			rates = append(rates, s.EnginePerSecond)
		}
		mu.Unlock()
	}
	done := make(chan loadgen.Result, 1)
	go func() {
		res, _ := loadgen.Run(ctx, lo)
		done <- res
	}()
	wait := func(f func() bool) {
		for ctx.Err() == nil && !f() {
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait(func() bool { return live.Done.Load() >= int64(o.Clients) })
	mu.Lock()
	win = true
	mu.Unlock()
	t0, tok0, done0 := time.Now(), live.Tokens.Load(), live.Done.Load()
	lastPoll := time.Now()
	wait(func() bool {
		if time.Since(lastPoll) >= o.Poll {
			lastPoll = time.Now()
			if now, err := getStatus(ctx, o); err == nil && now.Engine != nil && now.Engine.URL != st.Engine.URL {
				replaced = true
				return true
			}
		}
		if o.Requests > 0 {
			return live.Done.Load()-done0 >= int64(o.Requests)
		}
		return time.Since(t0) >= o.Measure
	})
	t1, tok1, done1 := time.Now(), live.Tokens.Load(), live.Done.Load()
	mu.Lock()
	win = false
	mu.Unlock()
	close(stop)
	res = <-done
	m = Measured{Seconds: t1.Sub(t0).Seconds(), Requests: int(done1 - done0), Tokens: tok1 - tok0, Width: st.Engine.Width}
	mu.Lock()
	defer mu.Unlock()
	return m, rates, res, replaced
}

// waitProbe polls while the loop is probing, within SettleTimeout.
func (o Options) waitProbe(ctx context.Context, st status) (status, error) {
	until := time.Now().Add(o.SettleTimeout)
	for {
		if a, _ := st.adapt(); a.State != "probing" {
			return st, nil
		}
		if time.Now().After(until) {
			return st, fmt.Errorf("the adaptive loop was still probing after %s (-settle-timeout)", o.SettleTimeout)
		}
		o.progress("waiting for the verify-cost probe to finish")
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(o.Poll):
		}
		next, err := getStatus(ctx, o)
		if err != nil {
			return st, err
		}
		if err := next.adapting(); err != nil {
			return st, err
		}
		st = next
	}
}

func (o Options) describeMeasure() string {
	if o.Requests > 0 {
		return fmt.Sprintf("%d requests", o.Requests)
	}
	return o.Measure.String()
}

func (o Options) progress(format string, a ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "adapteval: "+format+"\n", a...)
	}
}

// engine sets the engine's per-request figures from their rates.
func (m *Measured) engine(rates []float64) {
	if len(rates) == 0 {
		return
	}
	sort.Float64s(rates)
	sum := 0.0
	for _, v := range rates {
		sum += v
	}
	m.EngineSamples, m.EngineMeanPerSec, m.EngineMedianPerSec = len(rates), sum/float64(len(rates)), median(rates)
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// isExplore: the controller's trials and checks say so in their switch
// reason ("… (trial: width 4 predicted …)", internal/control), an older
// loop's explorations at its start ("explore: …", "re-explore wider: …").
func isExplore(reason string) bool {
	return strings.Contains(reason, "(trial: ") || strings.HasPrefix(reason, "explore") || strings.HasPrefix(reason, "re-explore")
}
