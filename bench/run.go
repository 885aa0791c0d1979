package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/speclaunch/speclaunch/key"
	"github.com/speclaunch/speclaunch/record"
)

// withDefaults fills zero options and refuses a plan that cannot yield a
// ranking, before anything is started.
func (o Options) withDefaults() (Options, error) {
	if o.Rounds == 0 {
		o.Rounds = DefaultRounds
	}
	if o.Rounds < MinRounds {
		return o, fmt.Errorf("bench: %d rounds is below the floor of %d: one sample per arm has no range, and a verdict compares ranges", o.Rounds, MinRounds)
	}
	switch {
	case o.Warmup == 0:
		o.Warmup = DefaultWarmup
	case o.Warmup < 0:
		o.Warmup = 0
	}
	if o.MaxTokens == 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.MaxTokens < 0 {
		return o, fmt.Errorf("bench: max tokens %d is negative", o.MaxTokens)
	}
	if o.Prompt == "" {
		o.Prompt = DefaultPrompt
		if o.PromptName == "" {
			o.PromptName = DefaultPromptName
		}
	}
	switch o.Schedule {
	case "":
		o.Schedule = ScheduleRestart
	case ScheduleRestart, ScheduleResident:
	default:
		return o, fmt.Errorf("bench: unknown schedule %q (want restart or resident)", o.Schedule)
	}
	if o.BasePort == 0 {
		o.BasePort = DefaultBasePort
	}
	if o.BasePort < 1 || o.BasePort+len(o.Arms) > 65535 {
		return o, fmt.Errorf("bench: base port %d cannot hold %d arms", o.BasePort, len(o.Arms))
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	classic, others := 0, 0
	for i, a := range o.Arms {
		switch a.Kind {
		case KindClassic:
			classic++
		case KindDefault, KindWidth:
			others++
			if err := key.CheckWidth(a.Width); err != nil {
				return o, fmt.Errorf("bench: arm %d (%s): %w", i, a.Label, err)
			}
		default:
			return o, fmt.Errorf("bench: arm %d (%s): unknown kind %q (want classic, default or width)", i, a.Label, a.Kind)
		}
	}
	if classic != 1 {
		return o, fmt.Errorf("bench: want exactly one classic arm, got %d", classic)
	}
	if others == 0 {
		return o, errors.New("bench: no width to measure: add the default arm or a width")
	}
	return o, nil
}

// visit is one stop of a round: an arm, and for classic which bracket.
type visit struct {
	arm     int
	bracket string
}

// roundOrder is classic first, the other arms rotated by the round index
// (round r starts at index r mod n), classic again last: drift then spreads
// over every arm instead of landing on the last ones, and the two classic
// samples bracket the round.
func roundOrder(ci int, others []int, r int) []visit {
	n := len(others)
	v := make([]visit, 0, n+2)
	v = append(v, visit{ci, BracketFirst})
	for k := 0; k < n; k++ {
		v = append(v, visit{others[(r+k)%n], ""})
	}
	return append(v, visit{ci, BracketLast})
}

type harness struct {
	o      Options
	start  Starter
	rec    *record.Record
	c      *client
	p      *progress
	ci     int
	others []int

	bodies    map[string][]byte
	live      map[int]Server
	failed    []bool
	declined  []bool
	noMetrics map[string]bool // by base URL: a Server need not be comparable
	pieces    map[[2]int][]int32
	// lastMetrics is arm i's /metrics as scraped right after its previous
	// request; it serves as the next request's "before" (halving the
	// scrapes: the harness must not be what it measures). Dropped whenever
	// arm i gets a new server or a request that was not scraped after.
	lastMetrics map[int]metrics
}

// Run measures every arm and fills rec.Method, rec.Arms, rec.Drift and
// rec.Verdict (the caller fills Key, Host, Engine, Models, Launcher and
// Name first; Name is the record's file name, used by the entry block).
// An arm that fails to start is recorded and the others go on. On ctx
// cancel Run stops every server it started, records what it has with
// Complete = false, and returns ctx.Err().
func Run(ctx context.Context, o Options, start Starter, rec *record.Record) (err error) {
	if start == nil || rec == nil {
		return errors.New("bench: run needs a starter and a record")
	}
	o, err = o.withDefaults()
	if err != nil {
		return err
	}
	h := &harness{o: o, start: start, rec: rec, c: newClient(o.RequestTimeout), p: newProgress(o),
		bodies: map[string][]byte{}, live: map[int]Server{}, noMetrics: map[string]bool{}, pieces: map[[2]int][]int32{}, lastMetrics: map[int]metrics{},
		failed: make([]bool, len(o.Arms)), declined: make([]bool, len(o.Arms))}
	h.prepare()

	defer func() {
		h.stopAll()
		h.finish(err)
	}()
	if o.Schedule == ScheduleResident {
		return h.resident(ctx)
	}
	return h.restart(ctx)
}

// prepare writes the method and one arm per spec into the record.
func (h *harness) prepare() {
	o, rec := h.o, h.rec
	if rec.Schema == 0 {
		rec.Schema = record.Schema
	}
	if rec.Key.Engine == string(key.Sim) || rec.Engine.Name == string(key.Sim) {
		rec.Simulated = true
	}
	if rec.Date == "" {
		rec.Date = time.Now().UTC().Format("2006-01-02")
	}
	if rec.Title == "" {
		rec.Title = DefaultTitle(rec)
	}
	rec.Complete = false
	sum := sha256.Sum256([]byte(o.Prompt))
	var widths []int
	rec.Arms = make([]record.Arm, len(o.Arms))
	h.ci = -1
	for i, a := range o.Arms {
		label := a.Label
		if label == "" {
			label = a.Kind
			if a.Kind == KindWidth {
				label = fmt.Sprintf("width %d", a.Width)
			}
		}
		rec.Arms[i] = record.Arm{Label: label, Kind: a.Kind, Width: a.Width, WidthSource: a.WidthSource, Runs: []record.Run{}}
		if a.Kind == KindClassic {
			h.ci = i
			continue
		}
		h.others = append(h.others, i)
		if !slices.Contains(widths, a.Width) {
			widths = append(widths, a.Width)
		}
	}
	slices.Sort(widths)
	elided := fmt.Sprintf("<%s, %d bytes>", o.PromptName, len(o.Prompt))
	if o.PromptName == "" {
		elided = fmt.Sprintf("<prompt, %d bytes>", len(o.Prompt))
	}
	per := "each round's visit starts the arm's server, sends the warm-up request(s) and one measured request, then stops it"
	if o.Schedule == ScheduleResident {
		per = "every arm's server runs at once on its own loopback port, gets its warm-up request(s) once, then one measured request per visit"
	}
	rec.Method = record.Method{
		Schedule:  o.Schedule,
		Rounds:    o.Rounds,
		Warmup:    o.Warmup,
		MaxTokens: o.MaxTokens,
		Prompt:    o.PromptName,
		PromptSHA: hex.EncodeToString(sum[:]),
		Endpoint:  Endpoint,
		Widths:    widths,
		Description: "Each round visits classic, then the other arms rotated by the round index, then classic again " +
			"(classic's first and last samples bracket the round and check drift); " + per + ". " +
			"Tokens/s is end to end: the final event's predicted_n over the wall time from sending the request to the last streamed event. " +
			"Only measured requests count; warm-ups are recorded and discarded.",
		RequestBody: strings.Replace(string(requestBody("", o.MaxTokens, "")), `"prompt":""`, `"prompt":`+fmt.Sprintf("%q", elided), 1),
	}
}

// DefaultTitle is the record title when the caller gives none.
func DefaultTitle(rec *record.Record) string {
	gpu := rec.Host.GPU
	if gpu == "" {
		gpu = "capability " + rec.Key.Capability
	}
	t := fmt.Sprintf("Draft width sweep: %s %s on %s, %s target", rec.Key.Engine, rec.Key.Drafter, gpu, rec.Key.Quant)
	if d := rec.Date; d != "" {
		if len(d) > 10 && d[4] == '-' { // RFC 3339: the day is enough for a title
			d = d[:10]
		}
		t += " (" + d + ")"
	}
	return t
}

func (h *harness) restart(ctx context.Context) error {
	per := h.o.Warmup + 1
	h.p.begin(len(h.o.Arms), h.o.Schedule, h.o.Rounds*(len(h.others)+2)*per)
	for r := 0; r < h.o.Rounds; r++ {
		for _, v := range roundOrder(h.ci, h.others, r) {
			if err := ctx.Err(); err != nil {
				return err
			}
			if h.failed[v.arm] {
				h.p.skip(per)
				continue
			}
			srv, err := h.startArm(ctx, v.arm, r)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				h.p.skip(per)
				continue
			}
			for w := 0; w < h.o.Warmup; w++ {
				if err := h.request(ctx, v.arm, srv, r+1, PhaseWarmup, ""); err != nil {
					return err
				}
			}
			if err := h.request(ctx, v.arm, srv, r+1, PhaseMeasured, v.bracket); err != nil {
				return err
			}
			h.stop(v.arm)
		}
	}
	return nil
}

func (h *harness) resident(ctx context.Context) error {
	n := len(h.o.Arms)
	h.p.begin(n, h.o.Schedule, h.o.Warmup*n+h.o.Rounds*(len(h.others)+2))
	type started struct {
		srv Server
		err error
	}
	res := make([]started, n)
	var wg sync.WaitGroup
	for i := range h.o.Arms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv, err := h.start(ctx, h.o.Arms[i], h.o.BasePort+i)
			res[i] = started{srv, err}
		}()
	}
	wg.Wait()
	for i, s := range res {
		if s.srv != nil {
			h.live[i] = s.srv
			delete(h.lastMetrics, i)
		}
	}
	for i, s := range res {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		visits := 1
		if i == h.ci {
			visits = 2
		}
		if s.err != nil {
			h.startFailed(i, 0, s.srv, s.err)
			h.p.skip(h.o.Warmup + visits*h.o.Rounds)
			continue
		}
		if s.srv == nil {
			h.startFailed(i, 0, nil, errors.New("starter returned no server"))
			h.p.skip(h.o.Warmup + visits*h.o.Rounds)
			continue
		}
		h.observe(i, s.srv)
	}
	warmOrder := append([]int{h.ci}, h.others...)
	for _, i := range warmOrder {
		if h.failed[i] {
			continue
		}
		for w := 0; w < h.o.Warmup; w++ {
			if err := h.request(ctx, i, h.live[i], 0, PhaseWarmup, ""); err != nil {
				return err
			}
		}
	}
	for r := 0; r < h.o.Rounds; r++ {
		for _, v := range roundOrder(h.ci, h.others, r) {
			if h.failed[v.arm] {
				continue
			}
			if err := h.request(ctx, v.arm, h.live[v.arm], r+1, PhaseMeasured, v.bracket); err != nil {
				return err
			}
		}
	}
	return nil
}

// startArm starts one server (restart schedule) and records a failure.
func (h *harness) startArm(ctx context.Context, i, round int) (Server, error) {
	srv, err := h.start(ctx, h.o.Arms[i], h.o.BasePort+i)
	if err == nil && srv == nil {
		err = errors.New("starter returned no server")
	}
	if err != nil {
		if ctx.Err() == nil {
			h.startFailed(i, round+1, srv, err)
		} else if srv != nil {
			_ = srv.Stop()
		}
		return nil, err
	}
	h.live[i] = srv
	delete(h.lastMetrics, i)
	h.observe(i, srv)
	return srv, nil
}

func (h *harness) startFailed(i, round int, srv Server, err error) {
	a := &h.rec.Arms[i]
	h.failed[i] = true
	a.Status = record.StatusFailed
	a.StatusReason = "start failed: " + err.Error()
	if round > 0 && len(a.Runs) > 0 {
		a.StatusReason = fmt.Sprintf("start failed in round %d: %s", round, err.Error())
	}
	if srv != nil {
		a.LastLog = srv.Tail()
		if serr := srv.Stop(); serr != nil {
			h.note(fmt.Sprintf("stopping %s after its failed start: %v", a.Label, serr))
		}
		delete(h.live, i)
	} else if t, ok := err.(interface{ Tail() []string }); ok {
		a.LastLog = t.Tail()
	}
	h.p.armFailed(a.Label, err.Error())
}

// observe reads what the engine says about the arm: the width it runs and
// whether it declined speculation.
func (h *harness) observe(i int, srv Server) {
	a := &h.rec.Arms[i]
	if a.Kind == KindClassic {
		return
	}
	if w := srv.EngineWidth(); w > 0 {
		if a.EngineWidth > 0 && a.EngineWidth != w {
			h.note(fmt.Sprintf("%s: the engine reported width %d on one start and %d on another", a.Label, a.EngineWidth, w))
		}
		a.EngineWidth = w
	}
	if srv.Declined() {
		h.declined[i] = true
	}
}

func (h *harness) note(s string) { h.rec.Notes = append(h.rec.Notes, s) }

func (h *harness) body(srv Server) []byte {
	id := srv.ModelID()
	b, ok := h.bodies[id]
	if !ok {
		b = requestBody(h.o.Prompt, h.o.MaxTokens, id)
		h.bodies[id] = b
	}
	return b
}

// request sends one request to arm i's server and records it. It returns
// an error only when ctx is done; a failed request is a recorded run.
func (h *harness) request(ctx context.Context, i int, srv Server, round int, phase, bracket string) error {
	a := &h.rec.Arms[i]
	spec := a.Kind != KindClassic && phase == PhaseMeasured
	if phase == PhaseMeasured {
		// The harness's own CPU while a measured request runs: what could
		// interfere with the engine being measured.
		cpu0, t0 := SelfCPU(), time.Now()
		defer func() {
			h.rec.Method.RequestCPUS += (SelfCPU() - cpu0).Seconds()
			h.rec.Method.RequestWallS += time.Since(t0).Seconds()
		}()
	}
	var before metrics
	haveBefore := false
	cached, haveCached := h.lastMetrics[i]
	delete(h.lastMetrics, i) // valid for this request only
	if spec && haveCached {
		before, haveBefore = cached, true
	} else if spec && !h.noMetrics[srv.BaseURL()] {
		m, err := h.c.scrapeMetrics(ctx, srv.BaseURL())
		switch {
		case err == nil && m.hasDrafts:
			before, haveBefore = m, true
		case err != nil && errors.Is(err, errNoMetrics), err == nil:
			h.noMetrics[srv.BaseURL()] = true // no page, or no speculative counters on it
		}
	}
	diags := len(srv.Diagnostics())

	res := h.c.complete(ctx, srv.BaseURL(), h.body(srv))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	run := record.Run{Round: round, Phase: phase, Bracket: bracket}
	if res.err != nil {
		run.Error = res.err.Error()
	} else {
		run.WallS = res.wall.Seconds()
		run.TTFTS = res.ttft.Seconds()
		run.CompletionTokens = res.tokens
		if res.wall > 0 {
			run.TokPerS = float64(res.tokens) / res.wall.Seconds()
		}
		run.PredictedMS, run.PredictedPerS = res.predictedMS, res.predictedPerS
		run.DraftN, run.DraftAccepted, run.DraftRounds = res.draftN, res.draftAcc, res.draftRounds
		run.Text, run.Pieces = res.text, res.pieces
		sum := sha256.Sum256([]byte(res.text))
		run.TextSHA256 = hex.EncodeToString(sum[:])
	}
	if ds := h.newDiags(ctx, srv, diags); len(ds) > 0 {
		for _, d := range ds {
			run.DiagRounds += d.Rounds
			run.DiagProposed += d.Proposed
			run.DiagAccepted += d.Accepted
			run.DiagSyncMS += d.SyncMS
		}
	}
	if spec && run.Error == "" && haveBefore {
		if after, err := h.c.scrapeMetrics(ctx, srv.BaseURL()); err == nil {
			h.lastMetrics[i] = after
			if drafts, byPos, ok := after.delta(before); ok {
				run.AcceptedByPos = byPos
				// the engine's own round count, when it gives one, wins (fillCycles)
				if run.DraftRounds == 0 && run.DiagRounds == 0 && drafts > 0 {
					run.Cycles, run.CyclesFrom = drafts, "metrics"
				}
			}
		}
	}
	a.Runs = append(a.Runs, run)
	if res.err == nil {
		h.pieces[[2]int{i, len(a.Runs) - 1}] = res.pieceEnds
	}
	h.observe(i, srv)
	h.p.request(a.Label, round, phase, run.TokPerS, run.Error)
	return nil
}

// diagWait bounds how long the harness waits for an engine's per-request
// diagnostics line, which the engine logs as the request ends and the
// supervisor reads asynchronously. Outside the measured window.
const diagWait = time.Second

// newDiags returns the diagnostics lines logged since the request began.
// A server that has logged none (llama.cpp, classic arms) costs nothing.
func (h *harness) newDiags(ctx context.Context, srv Server, before int) []Diag {
	ds := srv.Diagnostics()
	if len(ds) == 0 {
		return nil
	}
	deadline := time.Now().Add(diagWait)
	for len(ds) <= before && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
		ds = srv.Diagnostics()
	}
	if len(ds) <= before {
		return nil
	}
	return ds[before:]
}

func (h *harness) stop(i int) {
	srv, ok := h.live[i]
	if !ok {
		return
	}
	delete(h.live, i)
	h.observe(i, srv)
	if err := srv.Stop(); err != nil {
		h.note(fmt.Sprintf("stopping %s: %v", h.rec.Arms[i].Label, err))
	}
	h.c.forget()
}

func (h *harness) stopAll() {
	ids := make([]int, 0, len(h.live))
	for i := range h.live {
		ids = append(ids, i)
	}
	slices.Sort(ids)
	for _, i := range ids {
		h.stop(i)
	}
}

// finish sets the statuses the runs cannot show, then analyses.
func (h *harness) finish(err error) {
	for i := range h.rec.Arms {
		a := &h.rec.Arms[i]
		if h.declined[i] && a.Status != record.StatusFailed {
			a.Status = record.StatusNotMeasurement
			a.StatusReason = "the engine declined speculation: decline line in its log"
		}
	}
	h.rec.Complete = err == nil
	analyze(h.rec, func(a, i int) []int32 { return h.pieces[[2]int{a, i}] })
	h.p.finish(h.rec.Complete, err)
}

// SelfCPU is this process's user+system CPU time (engines excluded).
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
