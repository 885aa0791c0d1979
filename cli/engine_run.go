package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/key"
	"github.com/speclaunch/speclaunch/plan"
	"github.com/speclaunch/speclaunch/secret"
	"github.com/speclaunch/speclaunch/supervise"
	"github.com/speclaunch/speclaunch/width"
)

// processStart is taken at package initialization, after the Go runtime
// and every dependency have initialized: the launcher's own work before the
// engine's exec is measured from it (serve logs it as init_to_exec).
var processStart = time.Now()

// running is one engine process started from a plan.
type running struct {
	plan   *plan.Plan
	proc   *supervise.Process
	start  time.Time
	execAt time.Time // when the engine process had been exec'd
	ready  time.Duration

	mu       sync.Mutex
	obs      []engine.Observation // startup/width/decline lines seen
	diags    []engine.Diagnostics // per-request DFlash diagnostics lines
	declined bool
}

func (r *running) observe(line string) {
	if o, ok := r.plan.Adapter.ObserveLine(line); ok {
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

// startOptions are the knobs serve and bench share.
type startOptions struct {
	Out          io.Writer // where engine output goes
	Prefix       string
	Raw          bool
	ReadyTimeout time.Duration
	StopTimeout  time.Duration
	// Interrupt, when done, ends the wait for ready (a signal); nil = none.
	Interrupt context.Context
}

// checkLaunchable refuses a plan that cannot start, before anything runs:
// a missing target (what the operator typed, first), a missing binary, or
// a port already taken.
func checkLaunchable(p *plan.Plan, checkPort bool) error {
	s := p.Settings
	if s.Model.Value == "" {
		msg := "no target model: set model.path in the profile, --model/-m, or LLAMA_ARG_MODEL"
		for _, a := range s.EngineArgs.Value {
			if name, _, _ := strings.Cut(a, "="); name == "-hf" || name == "-hfr" || name == "--hf-repo" {
				msg += " (" + name + " is not enough: speclaunch reads the target's weight format from a local file, so download the GGUF and pass -m PATH)"
				break
			}
		}
		return &badInput{errors.New(msg)}
	}
	if p.Settings.Engine.Value != key.Sim && p.Facts.BinaryPath == "" {
		return &badInput{fmt.Errorf("engine binary %q not found (looked up %q on PATH); install %s or set engine.binary in the profile (--engine-binary, MLXCEL_ENGINE_BINARY)", p.Facts.Binary, p.Facts.Binary, s.Engine.Value)}
	}
	if len(p.Launch.Argv) > 0 {
		// What will be exec'd, whatever the engine: a drain switch stops
		// the old engine only after this check.
		if _, err := exec.LookPath(p.Launch.Argv[0]); err != nil {
			return &badInput{fmt.Errorf("engine binary %s cannot be run (%v); install it or fix engine.binary in the profile (--engine-binary, MLXCEL_ENGINE_BINARY)", p.Launch.Argv[0], errors.Unwrap(err))}
		}
	}
	if s.Engine.Value != key.Sim {
		if err := checkModelPath(s.Engine.Value, "target model", s.Model.Value, s.Model.Src.String()); err != nil {
			return err
		}
		if s.DraftModel.Value != "" {
			if err := checkModelPath(s.Engine.Value, "draft model", s.DraftModel.Value, s.DraftModel.Src.String()); err != nil {
				return err
			}
		}
	}
	if checkPort {
		if err := portFree(s.Host.Value, s.Port.Value); err != nil {
			return &badInput{fmt.Errorf("port %d on %s is not available (%v); stop what holds it or set --port / server.port / LLAMA_ARG_PORT", s.Port.Value, s.Host.Value, err)}
		}
	}
	return nil
}

// portFree checks that nothing listens on host:port now, by binding it
// for a moment.
func portFree(host string, port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return ln.Close()
}

// checkModelPath refuses a model path the engine cannot load: missing
// (unless the engine fetches it by name), or a FIFO, socket or device (the
// engine would block on it or read it without end); for llama.cpp also a
// directory, since llama-server's -m takes the .gguf file itself.
func checkModelPath(e key.Engine, what, path, src string) error {
	fi, err := os.Stat(path)
	if err != nil {
		if key.FetchesModel(e, path) {
			return nil
		}
		return &badInput{fmt.Errorf("%s %s (%s): %w", what, path, src, err)}
	}
	m := fi.Mode()
	switch {
	case m.IsRegular():
		return nil
	case m.IsDir() && e != key.LlamaCpp:
		return nil
	case m.IsDir():
		return &badInput{fmt.Errorf("%s %s (%s) is a directory: llama-server loads a .gguf file; give the path of the file itself", what, path, src)}
	}
	return &badInput{fmt.Errorf("%s %s (%s) is %s, not a model file or directory; give the path of the model itself", what, path, src, safefile.Kind(m))}
}

// startEngine starts the plan's engine and waits until it is ready. When
// the engine fails to become ready it is stopped and returned with the
// error, so callers can show its last lines.
func startEngine(ctx context.Context, p *plan.Plan, o startOptions) (*running, error) {
	r := &running{plan: p, start: time.Now()}
	out := o.Out
	var format func(stream, line string) []byte
	if p.Settings.LogFormat.Value == "json" && !o.Raw {
		format = engineLineJSON
	}
	proc, err := supervise.Start(ctx, supervise.Spec{
		Argv: p.Launch.Argv, Env: p.Launch.Env,
		Prefix: o.Prefix, Raw: o.Raw, Format: format, Stdout: out, Stderr: out,
		OnLine:      func(_, line string) { r.observe(line) },
		StopTimeout: o.StopTimeout,
	})
	if err != nil {
		return nil, &badInput{fmt.Errorf("start %s: %w", p.Settings.Engine.Value, err)}
	}
	r.proc = proc
	r.execAt = time.Now()
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
	if err := proc.WaitReady(waitCtx, supervise.HTTPReady(health), o.ReadyTimeout, 100*time.Millisecond); err != nil {
		var te *supervise.TimeoutError
		if errors.As(err, &te) {
			proc.Stop(o.StopTimeout)
			return r, fmt.Errorf("%s did not become ready at %s: %w (raise serve.ready_timeout / --ready-timeout if the model is large)", p.Settings.Engine.Value, health, err)
		}
		proc.Stop(o.StopTimeout)
		if o.Interrupt != nil && o.Interrupt.Err() != nil {
			return r, exitCode(130, fmt.Errorf("interrupted while %s was starting; it was stopped", p.Settings.Engine.Value))
		}
		return r, fmt.Errorf("%s failed to start: %w", p.Settings.Engine.Value, err)
	}
	r.ready = time.Since(r.start)
	return r, nil
}

// widthCheck is what verification found.
type widthCheck struct {
	Observed engine.Observation
	Verified bool   // the engine's width was read and matches
	Problem  string // non-empty: mismatch, decline, or speculation not live
	Note     string // could not verify (and why), not an error
	// ReadFrom says where the engine's width was read: its startup line, or
	// the probe's /metrics or /slots reading.
	ReadFrom string
}

// verify reads the width the engine really runs. mlxcel and sim state it at
// startup; llama-server states nothing, so one short greedy probe request
// shows whether drafting is live and /metrics (or /slots on older trees)
// shows the width.
func (r *running) verify(ctx context.Context, probe bool) widthCheck {
	p := r.plan
	want := p.Resolution
	if e := p.Settings.Engine.Value; e == key.VLLM || e == key.SGLang {
		return r.verifyPy(ctx)
	}
	if p.Settings.Engine.Value == key.LlamaCpp {
		if want.Source == width.Off {
			return widthCheck{Note: "speculation off: nothing to verify"}
		}
		if !probe {
			return widthCheck{Note: "probe disabled (--no-probe): width not verified"}
		}
		pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		obs, err := engine.VerifyLlama(pctx, p.Launch.BaseURL, p.Facts.Caps.Spelling, engineClient(p, 60*time.Second))
		if err != nil {
			return widthCheck{Note: "could not verify the width: " + err.Error()}
		}
		c := compare(want, obs)
		c.ReadFrom = "probe request, then " + obs.From
		return c
	}
	// mlxcel/sim: the startup line, which is printed before the port binds;
	// allow the output goroutine a moment to deliver it.
	deadline := time.Now().Add(2 * time.Second)
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
			return widthCheck{Observed: engine.Observation{Declined: true, Line: line}, Problem: "the engine declined speculation (\"falling back to classic decode\"): it runs without drafting"}
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
			if want.Source == width.Off {
				return widthCheck{Note: "speculation off"}
			}
			return widthCheck{Note: "the engine printed no speculative= line; run it with RUST_LOG=info to verify the width"}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func compare(want width.Resolution, o engine.Observation) widthCheck {
	c := widthCheck{Observed: o}
	switch {
	case o.Declined:
		c.Problem = "the engine declined speculation: it runs without drafting (" + o.Line + ")"
	case want.Source == width.Off:
		if o.Speculative {
			c.Problem = "speculation was resolved off but the engine drafts"
		}
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

// logPlan writes the one startup line: width, source, reason, entry and
// pin, the facts used, and the engine command.
func logPlan(log *slog.Logger, p *plan.Plan, msg string) {
	r, f := p.Resolution, p.Facts
	attrs := []any{
		"width", r.Width, "width_source", string(r.Source), "reason", r.Reason,
	}
	if r.Source == width.Off {
		attrs = []any{"speculation", "off", "reason", r.Reason}
	}
	if r.Entry != nil {
		attrs = append(attrs, "entry", r.Entry.ID, "pin", r.Entry.Pin, "record", r.Entry.Record)
	}
	if r.Source == width.Override {
		attrs = append(attrs, "from", p.Settings.Width.Src.String())
	}
	attrs = append(attrs,
		"engine", string(p.Settings.Engine.Value), "drafter", string(f.Drafter),
		"capability", f.CapabilityStr, "quant", string(f.Quant),
		"cmd", shellJoin(p.Launch.Argv))
	log.Info(msg+": "+Headline(r), attrs...)
	for _, w := range p.Warnings {
		log.Warn(w)
	}
}

// engineClient is the client for speclaunch's own requests to p's engine
// (verification, probes): it carries the engine's API key, if it has one.
func engineClient(p *plan.Plan, timeout time.Duration) *http.Client {
	return secret.Client(&http.Client{Timeout: timeout}, secret.Static(p.APIKey()))
}
