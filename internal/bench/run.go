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

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/record"
)

// Check refuses a plan that cannot yield a ranking or a record that can
// be read back, before anything starts and any record is written; Run
// makes the same check. note says where the run sends more than o asks
// (warmupNote), "" where it sends what o asks.
func Check(o Options) (note string, err error) {
	full, err := o.withDefaults()
	if err != nil {
		return "", err
	}
	asked := o
	asked.fillRuns() // cannot fail where withDefaults passed: the warm-up o asks, its default filled
	return warmupNote(asked.Warmup, full), nil
}

// warmupNote says when full, the options with their defaults, sends more
// warm-up requests per server start than asked: one per prompt of a set
// at least (fillPrompts).
func warmupNote(asked int, full Options) string {
	if full.Warmup <= asked {
		return ""
	}
	return fmt.Sprintf("%d warm-up requests per server start, not %d: at least one per prompt of the set (%d prompts)", full.Warmup, asked, len(full.Prompts))
}

// withDefaults fills zero options and refuses a plan that cannot yield a
// ranking, before anything is started.
func (o Options) withDefaults() (Options, error) {
	if err := o.fillRuns(); err != nil {
		return o, err
	}
	if err := o.fillPrompts(); err != nil {
		return o, err
	}
	if err := o.fillLoad(); err != nil {
		return o, err
	}
	if err := o.checkRuns(); err != nil {
		return o, err
	}
	return o, checkArms(o.Arms)
}

// checkRuns refuses a plan whose record would hold more runs than a record
// may (record.MaxRunsPerArm, record.MaxRuns): it would be written after
// the whole sweep and then refused by every command that reads records.
// Classic, visited twice a round, holds the most.
func (o *Options) checkRuns() error {
	np, arms := len(o.Prompts), max(len(o.Arms), 2)
	perVisit := np
	warm := o.Warmup // resident: once per arm
	if o.Schedule == ScheduleRestart {
		perVisit, warm = o.Warmup+np, 0
	}
	// Each alone first: their products below could overflow.
	if o.Rounds > record.MaxRunsPerArm {
		return fmt.Errorf("bench: %d rounds would make a record above the %d runs an arm may hold; use fewer rounds (5 is the usual)", o.Rounds, record.MaxRunsPerArm)
	}
	if o.Warmup > record.MaxRunsPerArm {
		return fmt.Errorf("bench: %d warm-up requests would make a record above the %d runs an arm may hold; use fewer (1 is the usual)", o.Warmup, record.MaxRunsPerArm)
	}
	classic := warm + 2*o.Rounds*perVisit
	total := arms*warm + o.Rounds*(arms+1)*perVisit
	switch {
	case classic > record.MaxRunsPerArm:
		return fmt.Errorf("bench: %d rounds of %d prompts (and %d warm-up requests) would put %d runs in the classic arm, above the %d an arm of a record may hold; use fewer rounds or prompts", o.Rounds, np, o.Warmup, classic, record.MaxRunsPerArm)
	case total > record.MaxRuns:
		return fmt.Errorf("bench: %d arms of %d rounds of %d prompts would make a record of %d runs, above the %d a record may hold; use fewer rounds, prompts or widths", arms, o.Rounds, np, total, record.MaxRuns)
	}
	return nil
}

// fillRuns fills and checks how much is measured: rounds, warm-up
// requests, tokens per request.
func (o *Options) fillRuns() error {
	if o.Rounds == 0 {
		o.Rounds = DefaultRounds
	}
	if o.Rounds < MinRounds {
		return fmt.Errorf("bench: %d rounds is below the floor of %d: one sample per arm has no range, and a verdict compares ranges", o.Rounds, MinRounds)
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
		return fmt.Errorf("bench: max tokens %d is negative", o.MaxTokens)
	}
	return nil
}

// fillPrompts makes the prompt set: the one prompt (the default when none
// is given) or a set whose prompts are named, non-empty and distinct. Each
// prompt is warmed once, so the warm-up is at least the set's size.
func (o *Options) fillPrompts() error {
	if len(o.Prompts) == 0 {
		if o.Prompt == "" {
			o.Prompt = DefaultPrompt
			if o.PromptName == "" {
				o.PromptName = DefaultPromptName
			}
		}
		o.Prompts = []Prompt{{Name: o.PromptName, Text: o.Prompt}}
	} else {
		seen := map[string]bool{}
		for i, p := range o.Prompts {
			switch {
			case p.Text == "":
				return fmt.Errorf("bench: prompt %d (%s) is empty", i, p.Name)
			case p.Name == "":
				return fmt.Errorf("bench: prompt %d of the set has no name", i)
			case seen[p.Name]:
				return fmt.Errorf("bench: prompt %s is in the set twice", p.Name)
			}
			seen[p.Name] = true
		}
		o.Prompt, o.PromptName = o.Prompts[0].Text, o.Prompts[0].Name
	}
	if o.Warmup > 0 && o.Warmup < len(o.Prompts) {
		o.Warmup = len(o.Prompts) // every prompt is sent once before any is measured
	}
	return nil
}

// fillLoad fills and checks how the requests are sent: temperature,
// concurrency, schedule, ports and timeout.
func (o *Options) fillLoad() error {
	if o.Temperature < 0 || o.Temperature > 5 || o.Temperature != o.Temperature {
		return fmt.Errorf("bench: temperature %v: want 0 (greedy) up to 5", o.Temperature)
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.Concurrency < 1 || o.Concurrency > MaxConcurrency {
		return fmt.Errorf("bench: concurrency %d: want 1 to %d requests in flight", o.Concurrency, MaxConcurrency)
	}
	switch o.Schedule {
	case "":
		o.Schedule = ScheduleRestart
	case ScheduleRestart, ScheduleResident:
	default:
		return fmt.Errorf("bench: unknown schedule %q (want restart or resident)", o.Schedule)
	}
	if o.BasePort == 0 {
		o.BasePort = DefaultBasePort
	}
	if o.BasePort < 1 || o.BasePort+len(o.Arms) > 65535 {
		return fmt.Errorf("bench: base port %d cannot hold %d arms", o.BasePort, len(o.Arms))
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	return nil
}

// checkArms refuses arms that cannot yield a ranking: exactly one classic
// arm, at least one width, and every width one the launcher accepts.
func checkArms(arms []ArmSpec) error {
	classic, others := 0, 0
	for i, a := range arms {
		switch a.Kind {
		case KindClassic:
			classic++
		case KindDefault, KindPolicy, KindWidth:
			others++
			if err := key.CheckWidth(a.Width); err != nil {
				return fmt.Errorf("bench: arm %d (%s): %w", i, a.Label, err)
			}
		default:
			return fmt.Errorf("bench: arm %d (%s): unknown kind %q (want classic, default, policy or width)", i, a.Label, a.Kind)
		}
	}
	if classic != 1 {
		return fmt.Errorf("bench: want exactly one classic arm, got %d", classic)
	}
	if others == 0 {
		return errors.New("bench: no width to measure: add the default arm or a width")
	}
	return nil
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
	cs     []*client // one per request in flight
	p      *progress
	ci     int
	others []int

	bodies    map[string][]byte
	live      map[int]Server
	failed    []bool
	probed    bool // the verify-cost probe has run (Options.Probe)
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
	cs := make([]*client, o.Concurrency)
	for k := range cs {
		cs[k] = newClient(o.RequestTimeout).withKey(o.APIKey)
	}
	h := &harness{o: o, start: start, rec: rec, cs: cs, p: newProgress(o),
		bodies: map[string][]byte{}, live: map[int]Server{}, noMetrics: map[string]bool{}, pieces: map[[2]int][]int32{}, lastMetrics: map[int]metrics{},
		failed: make([]bool, len(o.Arms)), declined: make([]bool, len(o.Arms))}
	h.prepare()

	defer func() {
		h.stopAll()
		h.finish(causeOf(ctx, err))
	}()
	if o.Schedule == ScheduleResident {
		return h.resident(ctx)
	}
	return h.restart(ctx)
}

// prepare writes the method and one arm per spec into the record.
func (h *harness) prepare() {
	rec := h.rec
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
	widths := h.prepareArms()
	rec.Method = describeMethod(h.o, widths)
}

// prepareArms writes one empty arm per spec (labelled by its kind or
// width when the spec has no label), notes classic's index and the
// others', and returns the distinct widths, sorted.
func (h *harness) prepareArms() []int {
	var widths []int
	h.rec.Arms = make([]record.Arm, len(h.o.Arms))
	h.ci = -1
	for i, a := range h.o.Arms {
		label := a.Label
		if label == "" {
			label = a.Kind
			if a.Kind == KindWidth {
				label = fmt.Sprintf("width %d", a.Width)
			}
		}
		h.rec.Arms[i] = record.Arm{Label: label, Kind: a.Kind, Width: a.Width, WidthSource: a.WidthSource, Runs: []record.Run{}}
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
	return widths
}

// describeMethod is the record's method: the options as figures, and a
// description a reader can follow without the code. The request body is
// shown with the prompt elided.
func describeMethod(o Options, widths []int) record.Method {
	per, elided := scheduleText(o)
	sum := sha256.Sum256([]byte(o.Prompts[0].Text))
	m := record.Method{
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
		RequestBody: strings.Replace(string(sampledBody("", o.MaxTokens, "", o.Temperature, DefaultSeed)), `"prompt":""`, `"prompt":`+fmt.Sprintf("%q", elided), 1),
		Sampling:    "greedy",
	}
	if o.Temperature > 0 {
		m.Sampling, m.Temperature, m.SeedRule = "sampled", o.Temperature, SeedRule
		m.Description += fmt.Sprintf(" Sampled at temperature %g with a fixed seed per request (%s), so that rounds differ in the text they sample while every arm sees the same seeds.", o.Temperature, SeedRule)
	}
	m.Concurrency = o.Concurrency
	if o.Concurrency > 1 {
		m.Slots, m.SlotsFrom = o.Slots, o.SlotsFrom
	}
	if len(o.Prompts) > 1 {
		describePromptSet(&m, o)
	}
	return m
}

// scheduleText says what one visit of an arm does under o's schedule,
// and how the method shows the prompt in the request body.
func scheduleText(o Options) (per, elided string) {
	elided = fmt.Sprintf("<%s, %d bytes>", o.PromptName, len(o.Prompt))
	if o.PromptName == "" {
		elided = fmt.Sprintf("<prompt, %d bytes>", len(o.Prompt))
	}
	measured := "one measured request"
	if len(o.Prompts) > 1 {
		measured = fmt.Sprintf("one measured request per prompt of the set (%d, in an order rotated by the round)", len(o.Prompts))
		elided = "<the prompt>"
	}
	if o.Concurrency > 1 {
		measured += fmt.Sprintf(", each as %d concurrent requests whose tokens are summed over the wall time from the first send to the last event", o.Concurrency)
	}
	per = "each round's visit starts the arm's server, sends the warm-up request(s), then " + measured + ", then stops it"
	if o.Schedule == ScheduleResident {
		per = "every arm's server runs at once on its own loopback port, gets its warm-up request(s) once, then " + measured + " per visit"
	}
	return per, elided
}

// describePromptSet replaces the one prompt's name and hash with the
// set's, each prompt hashed, and says what a change of prompt costs.
func describePromptSet(m *record.Method, o Options) {
	m.PromptSet = o.PromptSet
	m.Prompt = ""
	m.PromptSHA = ""
	for _, p := range o.Prompts {
		sum := sha256.Sum256([]byte(p.Text))
		m.Prompts = append(m.Prompts, record.Prompt{Name: p.Name, SHA256: hex.EncodeToString(sum[:]), Bytes: len(p.Text)})
	}
	m.Description += " With a prompt set, each measured request after a change of prompt prefills that prompt (its time is in the first-token time and the end-to-end rate, alike for every arm)."
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

// measure sends one visit's measured requests: one per prompt, the order
// rotated by the round so that no prompt always follows a change of server.
func (h *harness) measure(ctx context.Context, i int, srv Server, round int, bracket string) error {
	n := len(h.o.Prompts)
	for k := 0; k < n; k++ {
		if err := h.request(ctx, i, srv, round, PhaseMeasured, bracket, (round+k)%n); err != nil {
			return err
		}
	}
	return nil
}

// warm sends a server's discarded warm-up requests, cycling the prompts.
func (h *harness) warm(ctx context.Context, i int, srv Server) error {
	for w := 0; w < h.o.Warmup; w++ {
		if err := h.request(ctx, i, srv, 0, PhaseWarmup, "", w%len(h.o.Prompts)); err != nil {
			return err
		}
	}
	return nil
}

func (h *harness) restart(ctx context.Context) error {
	per := h.o.Warmup + len(h.o.Prompts)
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
			if err := h.warm(ctx, v.arm, srv); err != nil {
				return err
			}
			if err := h.measure(ctx, v.arm, srv, r+1, v.bracket); err != nil {
				return err
			}
			if r == h.o.Rounds-1 {
				h.probeCost(ctx, v.arm, srv)
			}
			h.stop(v.arm)
		}
	}
	return nil
}

func (h *harness) resident(ctx context.Context) error {
	n := len(h.o.Arms)
	np := len(h.o.Prompts)
	h.p.begin(n, h.o.Schedule, h.o.Warmup*n+h.o.Rounds*(len(h.others)+2)*np)
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
			h.p.skip(h.o.Warmup + visits*h.o.Rounds*np)
			continue
		}
		if s.srv == nil {
			h.startFailed(i, 0, nil, errors.New("starter returned no server"))
			h.p.skip(h.o.Warmup + visits*h.o.Rounds*np)
			continue
		}
		h.observe(i, s.srv)
	}
	warmOrder := append([]int{h.ci}, h.others...)
	for _, i := range warmOrder {
		if h.failed[i] {
			continue
		}
		if err := h.warm(ctx, i, h.live[i]); err != nil {
			return err
		}
	}
	for r := 0; r < h.o.Rounds; r++ {
		for _, v := range roundOrder(h.ci, h.others, r) {
			if h.failed[v.arm] {
				continue
			}
			if err := h.measure(ctx, v.arm, h.live[v.arm], r+1, v.bracket); err != nil {
				return err
			}
		}
	}
	if i := h.probeArm(); i >= 0 {
		h.probeCost(ctx, i, h.live[i])
	}
	return ctx.Err()
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

// seed is request k's seed in a batch for prompt pi in round (0 for
// warm-ups): DefaultSeed when greedy, SeedRule when sampling.
func (h *harness) seed(round, pi, k int) int64 {
	if h.o.Temperature == 0 {
		return DefaultSeed
	}
	return DefaultSeed + 10007*int64(round) + 101*int64(pi) + int64(k)
}

// body renders the request; greedy bodies are the same for every round
// and are built once per (model, prompt).
func (h *harness) body(srv Server, pi int, seed int64) []byte {
	id := srv.ModelID()
	if h.o.Temperature > 0 {
		return sampledBody(h.o.Prompts[pi].Text, h.o.MaxTokens, id, h.o.Temperature, seed)
	}
	k := fmt.Sprintf("%d\x00%s", pi, id)
	b, ok := h.bodies[k]
	if !ok {
		b = requestBody(h.o.Prompts[pi].Text, h.o.MaxTokens, id)
		h.bodies[k] = b
	}
	return b
}

// batch sends Concurrency requests at once (one client each) and waits for
// all of them; one request goes without a goroutine.
func (h *harness) batch(ctx context.Context, srv Server, round, pi int) []result {
	n := len(h.cs)
	out := make([]result, n)
	if n == 1 {
		out[0] = h.cs[0].complete(ctx, srv.BaseURL(), h.body(srv, pi, h.seed(round, pi, 0)))
		return out
	}
	bodies := make([][]byte, n)
	for k := range bodies {
		bodies[k] = h.body(srv, pi, h.seed(round, pi, k))
	}
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[k] = h.cs[k].complete(ctx, srv.BaseURL(), bodies[k])
		}()
	}
	wg.Wait()
	return out
}

// aggregate folds a batch into one result: tokens and draft counts summed,
// the wall time from the first send to the last event, the median
// first-token time; text, pieces and prompt timings are the first
// request's (the identity check compares one text).
func aggregate(rs []result) result {
	if len(rs) == 1 {
		return rs[0]
	}
	agg := rs[0]
	for k, r := range rs {
		if r.err != nil {
			agg.err = fmt.Errorf("request %d of %d in flight: %w", k+1, len(rs), r.err)
			return agg
		}
	}
	first, last := rs[0].start, rs[0].start.Add(rs[0].wall)
	ttfts := make([]float64, len(rs))
	agg.tokens, agg.predictedMS, agg.predictedPerS, agg.draftN, agg.draftAcc, agg.draftRounds = 0, 0, 0, 0, 0, 0
	for k, r := range rs {
		if r.start.Before(first) {
			first = r.start
		}
		if e := r.start.Add(r.wall); e.After(last) {
			last = e
		}
		ttfts[k] = float64(r.ttft)
		agg.tokens += r.tokens
		agg.predictedMS += r.predictedMS
		agg.predictedPerS += r.predictedPerS
		agg.draftN += r.draftN
		agg.draftAcc += r.draftAcc
		agg.draftRounds += r.draftRounds
	}
	agg.start, agg.wall = first, last.Sub(first)
	agg.ttft = time.Duration(describe(ttfts).Median)
	return agg
}

// request sends one request to arm i's server and records it. It returns
// an error only when ctx is done; a failed request is a recorded run.
func (h *harness) request(ctx context.Context, i int, srv Server, round int, phase, bracket string, pi int) error {
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
	before, haveBefore := h.metricsBefore(ctx, i, srv, spec)
	diags := len(srv.Diagnostics())

	res := aggregate(h.batch(ctx, srv, round, pi))
	if ctx.Err() != nil {
		return ctx.Err()
	}
	run := h.newRun(res, round, phase, bracket, pi)
	for _, d := range h.newDiags(ctx, srv, diags) {
		run.DiagRounds += d.Rounds
		run.DiagProposed += d.Proposed
		run.DiagAccepted += d.Accepted
		run.DiagSyncMS += d.SyncMS
	}
	if spec && run.Error == "" && haveBefore {
		h.metricsAfter(ctx, i, srv, &run, before)
	}
	a.Runs = append(a.Runs, run)
	if res.err == nil {
		h.pieces[[2]int{i, len(a.Runs) - 1}] = res.pieceEnds
	}
	h.observe(i, srv)
	h.p.request(a.Label, round, phase, run.TokPerS, run.Error)
	return nil
}

// metricsBefore is arm i's speculative counters before a request: the
// scrape taken after its previous request when there is one (valid for
// this request only), else a fresh scrape. A server whose /metrics has
// no such counters is not scraped again. Only speculative measured
// requests (spec) need them.
func (h *harness) metricsBefore(ctx context.Context, i int, srv Server, spec bool) (metrics, bool) {
	cached, haveCached := h.lastMetrics[i]
	delete(h.lastMetrics, i) // valid for this request only
	if spec && haveCached {
		return cached, true
	}
	if !spec || h.noMetrics[srv.BaseURL()] {
		return metrics{}, false
	}
	m, err := h.cs[0].scrapeMetrics(ctx, srv.BaseURL())
	switch {
	case err == nil && m.hasDrafts:
		return m, true
	case err != nil && errors.Is(err, errNoMetrics), err == nil:
		h.noMetrics[srv.BaseURL()] = true // no page, or no speculative counters on it
	}
	return metrics{}, false
}

// newRun records one request's result: its figures, or its error.
func (h *harness) newRun(res result, round int, phase, bracket string, pi int) record.Run {
	run := record.Run{Round: round, Phase: phase, Bracket: bracket}
	if len(h.o.Prompts) > 1 {
		run.Prompt = h.o.Prompts[pi].Name
	}
	if len(h.cs) > 1 {
		run.Requests = len(h.cs)
	}
	if h.o.Temperature > 0 {
		run.Seed = h.seed(round, pi, 0)
	}
	if res.err != nil {
		run.Error = res.err.Error()
		return run
	}
	run.WallS = res.wall.Seconds()
	run.TTFTS = res.ttft.Seconds()
	run.CompletionTokens = res.tokens
	if res.wall > 0 {
		run.TokPerS = float64(res.tokens) / res.wall.Seconds()
	}
	run.PredictedMS, run.PredictedPerS = res.predictedMS, res.predictedPerS
	run.DraftN, run.DraftAccepted, run.DraftRounds = res.draftN, res.draftAcc, res.draftRounds
	run.Text, run.Pieces = res.text, res.pieces
	run.PromptN, run.CacheN, run.PromptMS = res.promptN, res.cacheN, res.promptMS
	sum := sha256.Sum256([]byte(res.text))
	run.TextSHA256 = hex.EncodeToString(sum[:])
	return run
}

// metricsAfter scrapes arm i's counters after a request and puts the
// difference from before into run: acceptances by position, and the
// cycle count when the engine gave none of its own (fillCycles). The
// scrape is kept as the next request's before.
func (h *harness) metricsAfter(ctx context.Context, i int, srv Server, run *record.Run, before metrics) {
	after, err := h.cs[0].scrapeMetrics(ctx, srv.BaseURL())
	if err != nil {
		return
	}
	h.lastMetrics[i] = after
	drafts, byPos, ok := after.delta(before)
	if !ok {
		return
	}
	run.AcceptedByPos = byPos
	// the engine's own round count, when it gives one, wins (fillCycles)
	if run.DraftRounds == 0 && run.DiagRounds == 0 && drafts > 0 {
		run.Cycles, run.CyclesFrom = drafts, "metrics"
	}
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
	for _, c := range h.cs {
		c.forget()
	}
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

// causeOf is err, or where err is ctx's end, its cause: the caller's
// words for what stopped the run (a signal), which the progress says.
func causeOf(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return context.Cause(ctx)
	}
	return err
}

// SelfCPU is this process's user+system CPU time (engines excluded).
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
