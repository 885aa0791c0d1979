// Package instance holds one started engine: its process, what it said
// about its width, and the verification of that width. Serve's runtime
// and bench start engines through it.
package instance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/supervise"
	"github.com/speclaunch/speclaunch/internal/waitlog"
	"github.com/speclaunch/speclaunch/internal/width"
)

// StartError is an engine that could not be started at all (its binary
// cannot run): bad input.
type StartError struct{ Err error }

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// ErrInterrupted: the wait for ready was interrupted; the engine was
// stopped.
var ErrInterrupted = errors.New("interrupted")

// Verify reads the width the engine really runs (Check) and keeps it.
func (r *Engine) Verify(ctx context.Context, probe bool) Check {
	r.Check = r.verify(ctx, probe)
	return r.Check
}

// Engine is one engine process started from a plan: the handle serve's
// runtime and bench share. It remembers what the engine said about its
// width, and verifies it.
type Engine struct {
	Plan   *plan.Plan
	Proc   *supervise.Process
	Began  time.Time
	ExecAt time.Time     // when the engine process had been exec'd
	Ready  time.Duration // from Began to ready
	// Check is what verification found (Verify sets it).
	Check Check
	// StopTimeout is the SIGTERM grace of Stop.
	StopTimeout time.Duration
	client      func(timeout time.Duration) *http.Client
	log         *slog.Logger // Options.Log, for a stop that lasts
	clock       waitlog.Clock
	name        string // how the log names the engine

	mu       sync.Mutex
	obs      []engine.Observation // startup/width/decline lines seen
	diags    []engine.Diagnostics // per-request DFlash diagnostics lines
	declined bool
}

func (r *Engine) observe(line string) {
	if o, ok := r.Plan.Adapter.ObserveLine(line); ok {
		r.mu.Lock()
		r.obs = append(r.obs, o)
		if o.Declined {
			r.declined = true
		}
		r.mu.Unlock()
	}
	if d, ok := engine.ParseDiagnostics(line); ok {
		r.mu.Lock()
		r.diags = append(r.diags, d)
		r.mu.Unlock()
	}
}

// Options are the knobs serve and bench share.
type Options struct {
	Out io.Writer // where engine output goes
	// Secrets are redacted from the engine's lines before any is cut,
	// kept (Tail, a failed start's error, a record) or written
	// (supervise.Spec.Secrets).
	Secrets      *secret.Redactor
	Prefix       string
	Raw          bool
	ReadyTimeout time.Duration
	StopTimeout  time.Duration
	// Interrupt, when done, ends the wait for ready (a signal); nil = none.
	Interrupt context.Context
	// Format renders each engine line (a JSON log); nil = Prefix.
	Format func(stream, line string) []byte
	// Client makes the client of the launcher's own requests to the engine
	// (verification): it carries the engine's API key; nil = a plain one.
	Client func(p *plan.Plan, timeout time.Duration) *http.Client
	// Log hears of a load or a stop that lasts (waitlog), naming the
	// engine as Name ("engine 2"; "" = the engine's kind); nil = silent.
	Log  *slog.Logger
	Name string
	// Clock times those waits; nil = the wall clock.
	Clock waitlog.Clock
}

// Start starts the plan's engine and waits until it is ready. When the
// engine fails to become ready it is stopped and returned with the error,
// so callers can show its last lines.
func Start(ctx context.Context, p *plan.Plan, o Options) (*Engine, error) {
	r := &Engine{Plan: p, Began: time.Now(), StopTimeout: o.StopTimeout, log: o.Log, clock: o.Clock, name: cmp.Or(o.Name, string(p.Settings.Engine.Value))}
	if o.Client != nil {
		r.client = func(timeout time.Duration) *http.Client { return o.Client(p, timeout) }
	}
	out := o.Out
	format := o.Format
	if o.Raw {
		format = nil
	}
	proc, err := supervise.Start(ctx, supervise.Spec{
		Argv: p.Launch.Argv, Env: p.Launch.Env,
		Prefix: o.Prefix, Raw: o.Raw, Format: format, Stdout: out, Stderr: out, Secrets: o.Secrets,
		OnLine:      func(_, line string) { r.observe(line) },
		StopTimeout: o.StopTimeout,
	})
	if err != nil {
		return nil, &StartError{fmt.Errorf("start %s: %w", p.Settings.Engine.Value, err)}
	}
	r.Proc = proc
	r.ExecAt = time.Now()
	health := strings.TrimRight(p.Launch.BaseURL, "/") + "/health"
	waitCtx := ctx
	if o.Interrupt != nil {
		// The engine lives on ctx; the wait also ends on an interrupt, so
		// Ctrl-C during a long model load stops it at once rather than
		// after the ready timeout.
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(o.Interrupt, cancel)
		defer stop()
	}
	loading := waitlog.Start(o.Log, o.Clock, waitlog.For(r.name+" to load and answer /health", o.ReadyTimeout, ", then it is stopped"))
	err = proc.WaitReady(waitCtx, supervise.HTTPReady(health), o.ReadyTimeout, 100*time.Millisecond)
	loading()
	if err != nil {
		stop := func() { _ = r.Stop() }
		var te *supervise.TimeoutError
		if errors.As(err, &te) {
			stop()
			return r, fmt.Errorf("%s did not become ready at %s: %w (raise serve.ready_timeout / --ready-timeout if the model is large)", p.Settings.Engine.Value, health, err)
		}
		stop()
		if o.Interrupt != nil && o.Interrupt.Err() != nil {
			return r, fmt.Errorf("%w: %s was starting; it was stopped", ErrInterrupted, p.Settings.Engine.Value)
		}
		return r, fmt.Errorf("%s failed to start: %w", p.Settings.Engine.Value, err)
	}
	r.Ready = time.Since(r.Began)
	return r, nil
}

// Check is what verification found.
type Check struct {
	Observed engine.Observation
	// Verified: the engine's width was read and matches, or the width is 1
	// (Off) and there is none to read.
	Verified bool
	// Off: the width is 1, and the engine runs with no drafter.
	Off     bool
	Problem string // non-empty: mismatch, decline, or speculation not live
	Note    string // could not verify (and why), not an error
	// ReadFrom says where the engine's width was read: its startup line, or
	// the probe's /metrics or /slots reading.
	ReadFrom string
}

// offCheck is the check at width 1: every engine adapter starts the engine
// with no drafter there (engine.speculating; a drafter through engine.args
// or engine.env is refused), so there is no width to read and none that can
// differ from the plan's. It is verified, not unverifiable: an alert on
// speclaunch_width_verified must not fire because speculation is off.
var offCheck = Check{Verified: true, Off: true}

// Text is the check in words, as /speclaunch/status says it.
func (c Check) Text() string {
	switch {
	case c.Off:
		return "width 1: speculation off, the engine runs with no drafter"
	case c.Problem != "":
		return c.Problem
	case c.Verified:
		return fmt.Sprintf("engine runs width %d, read from %s", c.Observed.Width, c.ReadFrom)
	}
	return c.Note
}

// CheckBound is the most an engine's width check takes: llama-server's
// probe request and reads, vLLM's or SGLang's endpoint reads, the wait for
// mlxcel's (and the sim's) startup line to be delivered.
func CheckBound(e key.Engine) time.Duration {
	switch e {
	case key.LlamaCpp:
		return 60 * time.Second
	case key.VLLM, key.SGLang:
		return 30 * time.Second
	}
	return 2 * time.Second
}

// verify reads the width the engine really runs. mlxcel and sim state it at
// startup; llama-server states nothing, so one short greedy probe request
// shows whether drafting is live and /metrics (or /slots on older trees)
// shows the width.
func (r *Engine) verify(ctx context.Context, probe bool) Check {
	p := r.Plan
	want := p.Resolution
	if want.Source == width.Off {
		return offCheck
	}
	if e := p.Settings.Engine.Value; e == key.VLLM || e == key.SGLang {
		return r.verifyPy(ctx)
	}
	if p.Settings.Engine.Value == key.LlamaCpp {
		if !probe {
			return Check{Note: "probe disabled (--no-probe): width not verified"}
		}
		pctx, cancel := context.WithTimeout(ctx, CheckBound(key.LlamaCpp))
		defer cancel()
		obs, err := engine.VerifyLlama(pctx, p.Launch.BaseURL, p.Facts.Caps.Spelling, r.client(CheckBound(key.LlamaCpp)))
		if err != nil {
			return Check{Note: "could not verify the width: " + err.Error()}
		}
		c := compare(want, obs)
		c.ReadFrom = "probe request, then " + obs.From
		return c
	}
	// mlxcel/sim: the startup line, which is printed before the port binds;
	// allow the output goroutine a moment to deliver it.
	deadline := time.Now().Add(CheckBound(key.MLXCEL))
	for {
		r.mu.Lock()
		var last *engine.Observation
		for i := range r.obs {
			if r.obs[i].Declined || r.obs[i].Width > 0 || r.obs[i].Kind != "" || !r.obs[i].Speculative {
				o := r.obs[i]
				last = &o
			}
		}
		declined := r.declined
		r.mu.Unlock()
		if declined {
			line := ""
			r.mu.Lock()
			for _, o := range r.obs {
				if o.Declined {
					line = o.Line
				}
			}
			r.mu.Unlock()
			return Check{Observed: engine.Observation{Declined: true, Line: line}, Problem: "the engine declined speculation (\"falling back to classic decode\"): it runs without drafting"}
		}
		if last != nil {
			c := compare(want, *last)
			// The engine's block_size_from names why the engine took its
			// width: for a width speclaunch passes, always its flag
			// ("operator override"), whatever the launcher resolved from.
			c.ReadFrom = fmt.Sprintf("the engine's startup line (speculative=%s, block_size=%d)", last.Kind, last.Width)
			return c
		}
		if time.Now().After(deadline) {
			return Check{Note: "the engine printed no speculative= line; run it with RUST_LOG=info to verify the width"}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func compare(want width.Resolution, o engine.Observation) Check {
	c := Check{Observed: o}
	switch {
	case o.Declined:
		c.Problem = "the engine declined speculation: it runs without drafting (" + o.Line + ")"
	case !o.Speculative:
		c.Problem = fmt.Sprintf("speculation is not live: the engine drafted nothing (%s)", strings.TrimSpace(o.Line))
	case o.Width == 0:
		c.Note = "the engine did not state its width"
	case o.Width != want.Width:
		c.Problem = fmt.Sprintf("the engine runs width %d, not the resolved %d", o.Width, want.Width)
	default:
		c.Verified = true
	}
	return c
}

// verifyPy reads the width a vLLM or SGLang engine runs from what it
// serves: vLLM's /metrics per-position acceptance labels, SGLang's
// /server_info. Neither needs a probe request. When the endpoint cannot be
// read, the startup line (vLLM's engine config, SGLang's server_args) is
// the fallback.
func (r *Engine) verifyPy(ctx context.Context) Check {
	p := r.Plan
	want := p.Resolution
	cctx, cancel := context.WithTimeout(ctx, CheckBound(p.Settings.Engine.Value))
	defer cancel()
	client := r.httpClient(CheckBound(p.Settings.Engine.Value))
	var obs engine.Observation
	var err error
	if p.Settings.Engine.Value == key.VLLM {
		obs, err = engine.VerifyVLLM(cctx, p.Launch.BaseURL, client)
	} else {
		obs, err = engine.VerifySGLang(cctx, p.Launch.BaseURL, client)
	}
	if err == nil {
		c := compare(want, obs)
		c.ReadFrom = obs.From
		return c
	}
	r.mu.Lock()
	var last *engine.Observation
	for i := range r.obs {
		if o := r.obs[i]; o.Width > 0 || o.Kind == "off" {
			last = &o
		}
	}
	r.mu.Unlock()
	if last != nil {
		c := compare(want, *last)
		c.ReadFrom = "the engine's startup line"
		c.Note = "read from the startup line: " + err.Error()
		return c
	}
	return Check{Note: "could not verify the width: " + err.Error()}
}

// httpClient is the client of verification requests: Options.Client's,
// else a plain one.
func (r *Engine) httpClient(timeout time.Duration) *http.Client {
	if r.client == nil {
		return &http.Client{Timeout: timeout}
	}
	return r.client(timeout)
}

// What bench reads of an engine (the bench command adapts it to
// bench.Server; instance does not import bench).

// BaseURL is where the engine answers.
func (r *Engine) BaseURL() string { return r.Plan.Launch.BaseURL }

// ModelID is the model name requests name; "" lets the engine choose.
func (r *Engine) ModelID() string { return "" }

// EngineWidth is the width verification read from the engine (0 unread).
func (r *Engine) EngineWidth() int { return r.Check.Observed.Width }

// Declined reports the engine said it runs without speculation.
func (r *Engine) Declined() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.declined
}

// Diagnostics are the engine's per-request DFlash diagnostics lines.
func (r *Engine) Diagnostics() []engine.Diagnostics {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]engine.Diagnostics(nil), r.diags...)
}

// Tail is the engine's last output lines.
func (r *Engine) Tail() []string { return r.Proc.Tail() }

// Stop stops the engine (SIGTERM, SIGKILL after StopTimeout), saying a
// stop that lasts (waitlog).
func (r *Engine) Stop() error {
	defer waitlog.Start(r.log, r.clock, waitlog.For(fmt.Sprintf("%s (pid %d) to exit after SIGTERM", r.name, r.Proc.PID()), r.StopTimeout, ", then SIGKILL"))()
	return r.Proc.Stop(r.StopTimeout)
}
