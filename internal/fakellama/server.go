package fakellama

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// piece is one generated token: its text and id (from the capture).
type piece struct {
	text string
	id   int
}

// sseEvents splits a captured SSE body into its data payloads.
func sseEvents(b []byte) [][]byte {
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
			out = append(out, append([]byte(nil), d...))
		}
	}
	return out
}

// templates holds the captured JSON a tree's responses are built from.
type templates struct {
	completion  *object // non-stream /completion
	streamToken *object // a content event of the native stream
	streamFinal *object // the stop event of the native stream
	oaiChunk    *object // a /v1/completions content chunk
	oaiFinal    *object // the /v1/completions chunk with usage and timings
	props       *object
	slotIdle    *object
	slotServed  *object
	models      *object
	metrics     string // metrics-after without the per-position family
	pieces      []piece
}

func loadTemplates(tree string) *templates {
	t := &templates{}
	t.completion = mustObject(capture(tree + "-spec-completion.json"))
	ev := sseEvents(capture("new-spec-completion-stream.txt"))
	for _, e := range ev {
		o := mustObject(e)
		if o.get("stop") == true {
			continue
		}
		toks, _ := o.get("tokens").([]any)
		id := 0
		if len(toks) == 1 {
			n, _ := toks[0].(json.Number).Int64()
			id = int(n)
		}
		t.pieces = append(t.pieces, piece{o.get("content").(string), id})
	}
	ev = sseEvents(capture(tree + "-spec-completion-stream.txt"))
	t.streamToken = mustObject(ev[0])
	t.streamFinal = mustObject(ev[len(ev)-1])
	ev = sseEvents(capture(tree + "-spec-v1-completions-stream.txt"))
	t.oaiChunk = mustObject(ev[0])
	t.oaiFinal = mustObject(ev[len(ev)-2]) // the last is [DONE]
	t.props = mustObject(capture(tree + "-spec-props.json"))
	slots := mustArray(capture(tree + "-spec-slots-after.json"))
	t.slotIdle = slots[0].(*object)
	t.slotServed = slots[len(slots)-1].(*object)
	t.models = mustObject(capture(tree + "-spec-v1-models.json"))
	var keep []string
	for _, l := range strings.SplitAfter(string(capture(tree+"-spec-metrics-after.txt")), "\n") {
		if strings.Contains(l, "spec_decode_num_accepted_tokens_per_pos_total") {
			continue
		}
		keep = append(keep, l)
	}
	t.metrics = strings.Join(keep, "")
	return t
}

type slotState struct {
	id         int
	busy       bool
	served     bool
	lastPrompt string
	idTask     int
	nPrompt    int
	nProcessed int
	params     *object
	nDecoded   int
	lastUsed   int64 // µs since start of the last request (t_last)
	graphs     int   // "graphs reused" so far
}

type counters struct {
	promptTokens   int
	promptSeconds  float64
	predicted      int
	predictedSecs  float64
	nDecode        int
	nTokensMax     int
	draftTokens    int
	acceptedTokens int
	drafts         int
	perPos         []int
	processing     int
}

type server struct {
	c      *config
	t      *templates
	log    io.Writer
	start  time.Time
	mu     sync.Mutex
	cond   *sync.Cond
	loaded bool
	slots  []*slotState
	task   int
	cnt    counters
}

func newServer(c *config, log io.Writer) *server {
	s := &server{c: c, t: loadTemplates(c.tree), log: log, start: time.Now()}
	s.cond = sync.NewCond(&s.mu)
	for i := 0; i < c.nSlots; i++ {
		s.slots = append(s.slots, &slotState{id: i})
	}
	return s
}

// logf prints a NEW-style line ("0.00.002.913 I srv    ...") or, in OLD,
// the bare message.
func (s *server) logf(level, cat, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	if !s.c.isNew() {
		fmt.Fprintf(s.log, "%s %s\n", cat, msg)
		return
	}
	d := time.Since(s.start)
	us := d.Microseconds()
	fmt.Fprintf(s.log, "%d.%02d.%03d.%03d %s %s %s\n", us/60e6, (us/1e6)%60, (us/1e3)%1000, us%1000, level, cat, msg)
}

// fn12 is llama.cpp's "%12.*s" rendering of a function name in its srv and
// slot log lines: right-aligned in 12 columns, cut at 12
// ("srv    load_model:", "slot get_availabl:", "slot      release:").
func fn12(name string) string {
	if len(name) > 12 {
		name = name[:12]
	}
	return fmt.Sprintf("%12s", name)
}

// srvf prints a NEW "srv  <func>: ..." line.
func (s *server) srvf(level, fn, format string, a ...any) {
	s.logf(level, "srv ", fn12(fn)+": "+format, a...)
}

// slotf prints a NEW "slot <func>: id  N | task T | ..." line.
func (s *server) slotf(level, fn string, slot, task int, format string, a ...any) {
	s.logf(level, "slot", fmt.Sprintf("%s: id %2d | task %d | ", fn12(fn), slot, task)+format, a...)
}

func (s *server) logStart() {
	c := s.c
	if c.isNew() {
		s.logf("I", "cmn ", "common_param: common_params_print_info: verbosity = 3 (adjust with the `-lv N` CLI arg)")
		if c.noUI {
			s.srvf("I", "init", "The UI is disabled")
			s.srvf("I", "init", "Use --ui/--no-ui (or deprecated --webui/--no-webui) to enable/disable")
		}
		switch n := len(c.apiKeys); {
		case n == 0:
			for _, l := range []string{"-----------------",
				"CORS is set to allow all origins ('*') and no API key is set",
				"this can be a security risk (cross-origin attacks)",
				"more info: https://github.com/ggml-org/llama.cpp/pull/25655",
				"-----------------"} {
				s.srvf("W", "llama_server", "%s", l)
			}
		case n == 1:
			// llama-server's own masking: "****" and the last 4 characters
			// (the whole key when it is shorter).
			k := c.apiKeys[0]
			s.srvf("I", "init", "api_keys: ****%s", k[max(len(k)-4, 0):])
		default:
			s.srvf("I", "init", "api_keys: %d keys loaded", n)
		}
		s.srvf("I", "load_model", "loading model '%s'", c.model)
		if c.draft != "" {
			s.logf("I", "common_speculative_init_result:", "loading draft model '%s'", c.draft)
		}
		return
	}
	fmt.Fprintf(s.log, "main: n_parallel is set to auto, using n_parallel = %d and kv_unified = true\n", c.nSlots)
	fmt.Fprintf(s.log, "build: 8306 (b1a190e) with GNU 13.3.0 for Linux x86_64\n")
	fmt.Fprintf(s.log, "main: loading model\n")
	fmt.Fprintf(s.log, "srv    load_model: loading model '%s'\n", c.model)
	if c.draft != "" {
		fmt.Fprintf(s.log, "srv    load_model: loading draft model '%s'\n", c.draft)
	}
}

// markLoaded says the model is loaded, then serves: a request let in
// before the lines were written logged its slot line before "listening
// on" (TestServerMatchesH200 failed so under -race), which the real
// server never does.
func (s *server) markLoaded(port int) {
	c := s.c
	if c.isNew() {
		// -np auto (the default) turns on the unified KV cache; an explicit
		// -np leaves it off (the H200 capture, -np 1: kv_unified = 'false').
		s.srvf("I", "load_model", "initializing, n_slots = %d, n_ctx_slot = %d, kv_unified = '%t'", c.nSlots, c.nCtx, !c.npSet)
		s.srvf("I", "llama_server", "model loaded")
		s.srvf("I", "llama_server", "listening on http://%s:%d", c.host, port)
	} else {
		fmt.Fprintf(s.log, "main: model loaded\nmain: server is listening on http://%s:%d\nmain: starting the main loop...\n", c.host, port)
	}
	s.mu.Lock()
	s.loaded = true
	s.mu.Unlock()
}

func (s *server) logStop() {
	if s.c.isNew() {
		s.srvf("I", "operator()", "operator(): cleaning up before exit...")
		return
	}
	fmt.Fprintf(s.log, "srv    operator(): operator(): cleaning up before exit...\n")
}

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	w.Write(body)
}

func writeError(w http.ResponseWriter, code int, typ, msg string) {
	o := newObject().set("code", code).set("message", msg).set("type", typ)
	writeJSON(w, code, toJSON(newObject().set("error", o)))
}

// UnauthorizedBody is llama-server's answer to a request without a valid
// API key (tools/server/server-http.cpp, middleware_validate_api_key).
const UnauthorizedBody = `{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}`

// publicPaths need no API key (d32676d's get_public_endpoints).
var publicPaths = map[string]bool{"/health": true, "/v1/health": true, "/models": true, "/v1/models": true}

// authorized is llama-server's key check: no keys, a public path, or the
// Authorization header (else X-Api-Key), less a "Bearer " prefix, equal to
// one of the keys.
func (s *server) authorized(r *http.Request) bool {
	if len(s.c.apiKeys) == 0 || publicPaths[r.URL.Path] {
		return true
	}
	got := r.Header.Get("Authorization")
	if got == "" {
		got = r.Header.Get("X-Api-Key")
	}
	got = strings.TrimPrefix(got, "Bearer ")
	for _, k := range s.c.apiKeys {
		if got == k {
			return true
		}
	}
	return false
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Server", "llama.cpp")
	w.Header().Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
	if r.Method == http.MethodOptions {
		// Browsers send no Authorization on a preflight: answered first.
		w.Header().Set("Access-Control-Allow-Credentials", "true")
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
		w.Header().Set("Access-Control-Allow-Headers", "*")
		w.Header().Set("Content-Type", "text/html")
		return
	}
	s.mu.Lock()
	loaded := s.loaded
	s.mu.Unlock()
	if !loaded {
		writeJSON(w, http.StatusServiceUnavailable, []byte(LoadingBody))
		return
	}
	if !s.authorized(r) {
		writeJSON(w, http.StatusUnauthorized, []byte(UnauthorizedBody))
		s.srvf("W", "operator()", "unauthorized: Invalid API Key")
		return
	}
	switch r.URL.Path {
	case "/health", "/v1/health":
		writeJSON(w, 200, []byte(`{"status":"ok"}`))
	case "/props":
		writeJSON(w, 200, s.props())
	case "/slots":
		if !s.c.slots {
			writeError(w, 501, "not_supported_error", "This server does not support slots endpoint. Start it with `--slots`")
			return
		}
		writeJSON(w, 200, s.slotsJSON())
	case "/v1/models", "/models":
		writeJSON(w, 200, s.modelsJSON())
	case "/metrics":
		if !s.c.metrics {
			writeError(w, 501, "not_supported_error", "This server does not support metrics endpoint. Start it with `--metrics`")
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, s.metricsText())
	case "/completion", "/completions":
		s.completion(w, r, false)
	case "/v1/completions":
		s.completion(w, r, true)
	default:
		writeError(w, 404, "not_found_error", "File Not Found")
	}
}

func (s *server) props() []byte {
	p := clone(s.t.props).(*object)
	p.set("total_slots", s.c.nSlots)
	p.set("model_alias", s.c.alias)
	p.set("model_path", s.c.model)
	p.set("endpoint_slots", s.c.slots)
	p.set("endpoint_metrics", s.c.metrics)
	if dg := p.obj("default_generation_settings"); dg != nil {
		dg.set("n_ctx", s.c.nCtx)
	}
	return toJSON(p)
}

func (s *server) modelsJSON() []byte {
	m := clone(s.t.models).(*object)
	if ms, ok := m.get("models").([]any); ok && len(ms) > 0 {
		e := ms[0].(*object)
		e.set("name", s.c.alias).set("model", s.c.alias)
	}
	if ds, ok := m.get("data").([]any); ok && len(ds) > 0 {
		e := ds[0].(*object)
		e.set("id", s.c.alias).set("created", time.Now().Unix())
		if a, ok := e.get("aliases").([]any); ok && len(a) > 0 {
			e.set("aliases", []any{s.c.alias})
		}
		if meta := e.obj("meta"); meta != nil && meta.has("n_ctx") {
			meta.set("n_ctx", s.c.nCtx)
		}
	}
	return toJSON(m)
}

// slotSpeculative is /slots' per-slot "speculative": NEW true only when
// drafting is configured; OLD true whenever a draft model is loaded.
func (s *server) slotSpeculative() bool {
	if s.c.isNew() {
		return s.c.drafting()
	}
	return s.c.draft != ""
}

func (s *server) slotsJSON() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []any{}
	for _, sl := range s.slots {
		o := newObject().set("id", sl.id).set("n_ctx", s.c.nCtx).set("speculative", s.slotSpeculative()).set("is_processing", sl.busy)
		if sl.served {
			tmpl := s.t.slotServed
			o.set("id_task", sl.idTask)
			if tmpl.has("n_prompt_tokens") {
				o.set("n_prompt_tokens", sl.nPrompt)
				o.set("n_prompt_tokens_processed", sl.nProcessed)
				o.set("n_prompt_tokens_cache", 0)
			}
			o.set("params", sl.params)
			o.set("next_token", []any{newObject().set("has_next_token", false).set("has_new_line", false).set("n_remain", 0).set("n_decoded", sl.nDecoded)})
		}
		out = append(out, o)
	}
	return toJSON(out)
}

func fmtMetric(v float64) string {
	if math.IsInf(v, 1) {
		return "inf"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

func (s *server) metricsText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.cnt
	rate := func(n int, sec float64) float64 {
		if sec <= 0 {
			if n > 0 && !s.c.isNew() {
				return math.Inf(1)
			}
			return 0
		}
		return float64(n) / sec
	}
	busy := 0.0
	if k.nDecode > 0 {
		busy = 1
	}
	vals := map[string]float64{
		"prompt_tokens_total":                   float64(k.promptTokens),
		"prompt_seconds_total":                  math.Round(k.promptSeconds*1000) / 1000,
		"tokens_predicted_total":                float64(k.predicted),
		"tokens_predicted_seconds_total":        math.Round(k.predictedSecs*1000) / 1000,
		"n_decode_total":                        float64(k.nDecode),
		"n_tokens_max":                          float64(k.nTokensMax),
		"spec_decode_num_draft_tokens_total":    float64(k.draftTokens),
		"spec_decode_num_accepted_tokens_total": float64(k.acceptedTokens),
		"spec_decode_num_drafts_total":          float64(k.drafts),
		"prompt_tokens_seconds":                 rate(k.promptTokens, math.Round(k.promptSeconds*1000)/1000),
		"predicted_tokens_seconds":              rate(k.predicted, math.Round(k.predictedSecs*1000)/1000),
		"requests_processing":                   float64(k.processing),
		"requests_deferred":                     0,
		"n_busy_slots_per_decode":               busy,
	}
	var b strings.Builder
	for _, l := range strings.SplitAfter(s.t.metrics, "\n") {
		if strings.HasPrefix(l, "llamacpp:") {
			name, _, _ := strings.Cut(strings.TrimPrefix(l, "llamacpp:"), " ")
			if v, ok := vals[name]; ok {
				fmt.Fprintf(&b, "llamacpp:%s %s\n", name, fmtMetric(v))
				continue
			}
		}
		b.WriteString(l)
	}
	if s.c.isNew() && len(k.perPos) > 0 {
		b.WriteString("# HELP llamacpp:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position\n")
		b.WriteString("# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter\n")
		for i, n := range k.perPos {
			fmt.Fprintf(&b, "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"%d\"} %d\n", i, n)
		}
	}
	return b.String()
}

type completionReq struct {
	Prompt      json.RawMessage `json:"prompt"`
	NPredict    *int            `json:"n_predict"`
	MaxTokens   *int            `json:"max_tokens"`
	Temperature *float64        `json:"temperature"`
	Stream      bool            `json:"stream"`
	Model       string          `json:"model"`
}

// acquire takes the highest-numbered free slot (llama-server's LRU picked
// slot 3 of 4 first in the captures), waiting while all are busy.
func (s *server) acquire(prompt string) *slotState {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		// prefer the slot that last served this prompt (LCP similarity)
		for _, sl := range s.slots {
			if !sl.busy && sl.served && sl.lastPrompt == prompt {
				sl.busy = true
				return sl
			}
		}
		for i := len(s.slots) - 1; i >= 0; i-- {
			if sl := s.slots[i]; !sl.busy {
				sl.busy = true
				return sl
			}
		}
		s.cond.Wait()
	}
}

func (s *server) release(sl *slotState) {
	s.mu.Lock()
	sl.busy = false
	s.mu.Unlock()
	s.cond.Broadcast()
}

// round is one decode step: d drafted tokens (all accepted: the captured
// draft model is a copy of the target) and the tokens it emits.
type round struct {
	drafted int
	emit    int
}

// plan splits n tokens into decode steps. The first token comes from the
// prompt. NEW drafts min(n_max, remaining-1) per step (the capture: n_max 3,
// 16 tokens → draft_n 11 in 4 steps); OLD drafted n_max-1 per step in its
// capture (n_max 3 → draft_n 10 in 5 steps), which the fake mimics.
func (s *server) plan(n int) []round {
	if n <= 0 {
		return nil
	}
	rs := []round{{0, 1}}
	per := s.c.nMax
	if !s.c.isNew() {
		per = s.c.nMax - 1
	}
	done := 1
	for done < n {
		d := 0
		if s.c.drafting() {
			d = min(per, n-done-1)
		}
		if d < 0 {
			d = 0
		}
		rs = append(rs, round{d, d + 1})
		done += d + 1
	}
	return rs
}

// completion answers /completion and /v1/completions (oai) the way the
// captured llama-server did: read the request, take a slot, evaluate the
// prompt, generate (streaming as it goes), account, then send the final
// object. Each step is its own method on the request's job.
func (s *server) completion(w http.ResponseWriter, r *http.Request, oai bool) {
	j, ok := readCompletion(w, r, s.c.nCtx)
	if !ok {
		return
	}
	j.oai = oai
	j.sl = s.acquire(j.prompt)
	defer s.release(j.sl)
	s.claim(j)
	defer func() { s.mu.Lock(); s.cnt.processing--; s.mu.Unlock() }()

	j.evalPrompt()
	j.startResponse(w)
	if !s.generate(j, r) {
		return
	}
	tm := j.timings()
	params := s.genSettings(s.t.completion.obj("generation_settings"), j.temp, j.nPredict, j.stream)
	graphs := s.account(j)
	s.logRequest(j.sl.id, j.task, j.promptN, j.promptMS, j.n, j.predMS, j.draftN, j.steps, j.nEval+j.n-1, graphs)
	if oai {
		s.finishOAI(j, tm)
		return
	}
	s.finishNative(j, tm, params)
}

// job is one completion request as it moves through the fake: what was
// asked, the slot it runs on, and what it produced, so the steps of
// completion share it instead of a dozen locals.
type job struct {
	oai      bool
	stream   bool
	prompt   string
	nPredict int     // as asked; -1 when the request set no limit
	temp     float64 // sampling temperature, llama-server's default when unset
	nEval    int     // prompt tokens, "<s>" included
	n        int     // tokens to generate

	sl       *slotState
	task     int
	cacheN   int // prompt tokens reused from the slot's cache
	promptN  int // prompt tokens evaluated
	promptMS float64

	w       http.ResponseWriter
	flusher http.Flusher
	id      string // the OpenAI-style completion id
	created int64

	rounds  []round
	content strings.Builder
	draftN  int
	steps   int
	perPos  []int
	predMS  float64
}

// readCompletion decodes and checks the request body, answering the
// client itself (false) when it is not one the fake serves. The number of
// tokens to generate is capped by the context left after the prompt, as
// llama-server does.
func readCompletion(w http.ResponseWriter, r *http.Request, nCtx int) (*job, bool) {
	if r.Method != http.MethodPost {
		writeError(w, 405, "invalid_request_error", "Method Not Allowed")
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		writeError(w, 400, "invalid_request_error", err.Error())
		return nil, false
	}
	var req completionReq
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, 400, "invalid_request_error", "[json.exception.parse_error] "+err.Error())
		return nil, false
	}
	j := &job{stream: req.Stream, nPredict: -1, temp: 0.800000011920929}
	if err := json.Unmarshal(req.Prompt, &j.prompt); err != nil || req.Prompt == nil {
		writeError(w, 400, "invalid_request_error", "\"prompt\" must be a string (fakellama supports string prompts only)")
		return nil, false
	}
	if req.NPredict != nil {
		j.nPredict = *req.NPredict
	} else if req.MaxTokens != nil {
		j.nPredict = *req.MaxTokens
	}
	if req.Temperature != nil {
		j.temp = *req.Temperature
	}
	j.nEval = 1 + len(strings.Fields(j.prompt)) // "<s> hello world" = 3
	j.n = j.nPredict
	if j.n < 0 || j.n > nCtx-j.nEval {
		j.n = max(0, nCtx-j.nEval)
	}
	return j, true
}

// claim numbers the task on its acquired slot, notes what the slot's
// cache can reuse, counts the request as processing, and prints NEW's
// slot-selection lines.
func (s *server) claim(j *job) {
	sl := j.sl
	s.mu.Lock()
	reused := sl.served && sl.lastPrompt == j.prompt
	if reused && j.nEval > 1 {
		j.cacheN = j.nEval - 1
	}
	prevTokens, lastUsed := sl.nPrompt, sl.lastUsed
	s.task++
	j.task = s.task*6 + 2
	s.cnt.processing++
	s.mu.Unlock()
	if !s.c.isNew() {
		return
	}
	switch {
	case reused:
		s.slotf("I", "get_availabl", sl.id, -1, "selected slot by LCP similarity, f_sim_best = %.3f (> 0.100 thold), f_keep = %.3f", 1.0, float64(j.nEval)/float64(max(prevTokens, 1)))
	case sl.served:
		s.slotf("I", "get_availabl", sl.id, -1, "selected slot by LRU, t_last = %d", lastUsed)
	default:
		s.slotf("I", "get_availabl", sl.id, -1, "selected slot by LRU, t_last = -1")
	}
	s.slotf("I", "launch_slot_", sl.id, j.task, "processing task, is_child = 0")
	if j.cacheN > 0 && j.cacheN == j.nEval-1 {
		s.slotf("W", "operator()", sl.id, j.task, "need to evaluate at least 1 token for each active slot (n_past = %d, task.n_tokens() = %d)", j.nEval, j.nEval)
		s.slotf("W", "operator()", sl.id, j.task, "n_past was set to %d", j.cacheN)
	}
}

// evalPrompt spends 200 µs per uncached prompt token, so the prompt's
// timings are real durations.
func (j *job) evalPrompt() {
	j.promptN = j.nEval - j.cacheN
	t0 := time.Now()
	time.Sleep(time.Duration(j.promptN) * 200 * time.Microsecond)
	j.promptMS = float64(time.Since(t0).Microseconds()) / 1000
}

// startResponse sends a stream's headers and names the completion.
func (j *job) startResponse(w http.ResponseWriter) {
	j.w = w
	j.flusher, _ = w.(http.Flusher)
	if j.stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
	}
	j.id = "chatcmpl-" + randAlnum(32)
	j.created = time.Now().Unix()
}

// send writes one SSE event and flushes it; false once the client is gone.
func (j *job) send(o *object) bool {
	if _, err := fmt.Fprintf(j.w, "data: %s\n\n", toJSON(o)); err != nil {
		return false
	}
	if j.flusher != nil {
		j.flusher.Flush()
	}
	return true
}

// generate runs the decode steps of s.plan, paced at the configured rate,
// counting drafts per position and streaming each token. It returns false
// when the client went away mid-generation.
func (s *server) generate(j *job, r *http.Request) bool {
	j.rounds = s.plan(j.n)
	j.perPos = make([]int, max(s.c.nMax, 0))
	var pace time.Duration
	if s.c.tokensPerS > 0 {
		pace = time.Duration(float64(time.Second) / s.c.tokensPerS)
	}
	t1 := time.Now()
	produced := 0
	oldDrop := !j.oai && !s.c.isNew() && s.c.drafting() // /v1/completions was complete
	for ri, rd := range j.rounds {
		if rd.drafted > 0 {
			j.draftN += rd.drafted
			j.steps++
			for p := 0; p < rd.drafted && p < len(j.perPos); p++ {
				j.perPos[p]++
			}
		}
		if pace > 0 {
			// Against a schedule from the first token on, not one sleep
			// per round: a sleep that overshoots (a timer's resolution, a
			// busy machine) is made up by the next, so the rate is the one
			// asked for.
			select {
			case <-time.After(time.Until(t1.Add(pace * time.Duration(produced+rd.emit)))):
			case <-r.Context().Done():
				return false
			}
		}
		start := produced
		produced += rd.emit
		// OLD with a draft model never streamed its last step's tokens on
		// the native /completion stream.
		quiet := oldDrop && ri == len(j.rounds)-1 && ri > 0
		if !s.emit(j, start, produced, quiet) {
			return false
		}
	}
	j.predMS = float64(time.Since(t1).Microseconds()) / 1000
	if j.predMS <= 0 {
		j.predMS = 0.001
	}
	return true
}

// emit appends tokens [start, end) of the captured text and, on a stream
// that is not quiet, sends each as its own event; false once the client
// is gone.
func (s *server) emit(j *job, start, end int, quiet bool) bool {
	for i := start; i < end; i++ {
		p := s.t.pieces[i%len(s.t.pieces)]
		j.content.WriteString(p.text)
		if !j.stream || quiet {
			continue
		}
		var ev *object
		if j.oai {
			ev = s.oaiChunk(p.text, "", j.created, j.id)
		} else {
			ev = clone(s.t.streamToken).(*object)
			ev.set("content", p.text).set("tokens", []any{p.id})
			if s.c.isNew() {
				ev.set("tokens_predicted", i+1)
			} else {
				ev.set("tokens_predicted", end)
			}
			ev.set("tokens_evaluated", j.nEval)
		}
		if !j.send(ev) {
			return false
		}
	}
	return true
}

// timings builds the response's "timings" object, in the captured key
// order; the draft counts only when the request drafted.
func (j *job) timings() *object {
	tm := newObject()
	tm.set("cache_n", j.cacheN).set("prompt_n", j.promptN).set("prompt_ms", j.promptMS)
	tm.set("prompt_per_token_ms", j.promptMS/float64(max(j.promptN, 1)))
	tm.set("prompt_per_second", 1e3/j.promptMS*float64(j.promptN))
	tm.set("predicted_n", j.n).set("predicted_ms", j.predMS)
	tm.set("predicted_per_token_ms", j.predMS/float64(max(j.n, 1)))
	tm.set("predicted_per_second", 1e3/j.predMS*float64(j.n))
	if j.draftN > 0 {
		tm.set("draft_n", j.draftN).set("draft_n_accepted", j.draftN)
	}
	return tm
}

// account records the request on its slot (for /slots) and in the
// server's counters (for /metrics), and returns the slot's graphs-reused
// count for the log line.
func (s *server) account(j *job) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := j.sl
	sl.served, sl.lastPrompt, sl.idTask, sl.nDecoded = true, j.prompt, j.task, j.n
	sl.lastUsed = time.Since(s.start).Microseconds()
	sl.graphs += max(len(j.rounds)-1, 0)
	sl.nPrompt, sl.nProcessed = j.nEval+j.n-1, j.promptN
	sl.params = s.genSettings(s.t.slotServed.obj("params"), j.temp, j.nPredict, j.stream)
	k := &s.cnt
	k.promptTokens += j.promptN
	k.promptSeconds += j.promptMS / 1000
	k.predicted += j.n
	k.predictedSecs += j.predMS / 1000
	k.nDecode += len(j.rounds)
	k.nTokensMax = max(k.nTokensMax, j.nEval+j.n-1)
	if j.draftN > 0 {
		k.draftTokens += j.draftN
		k.acceptedTokens += j.draftN
		k.drafts += j.steps
		if len(k.perPos) < len(j.perPos) {
			k.perPos = append(k.perPos, make([]int, len(j.perPos)-len(k.perPos))...)
		}
		for i, v := range j.perPos {
			k.perPos[i] += v
		}
	}
	return sl.graphs
}

// finishOAI sends /v1/completions' last chunk (usage and timings) and
// [DONE], or the whole text_completion object when not streaming.
func (s *server) finishOAI(j *job, tm *object) {
	fin := s.oaiChunk("", "length", j.created, j.id)
	usage := newObject().set("completion_tokens", j.n).set("prompt_tokens", j.nEval).set("total_tokens", j.nEval+j.n)
	if u := s.t.oaiFinal.obj("usage"); u != nil && u.has("prompt_tokens_details") {
		usage.set("prompt_tokens_details", newObject().set("cached_tokens", j.cacheN))
	}
	fin.set("usage", usage)
	fin.del("id")
	fin.set("id", j.id)
	fin.set("timings", tm)
	if j.stream {
		j.send(fin)
		io.WriteString(j.w, "data: [DONE]\n\n")
		return
	}
	ch := fin.get("choices").([]any)[0].(*object)
	ch.set("text", j.content.String())
	fin.set("object", "text_completion")
	writeJSON(j.w, 200, toJSON(fin))
}

// finishNative sends /completion's stop event, or the whole response
// when not streaming.
func (s *server) finishNative(j *job, tm, params *object) {
	var final *object
	if j.stream {
		final = clone(s.t.streamFinal).(*object)
		final.set("content", "")
	} else {
		final = clone(s.t.completion).(*object)
		final.set("content", j.content.String())
	}
	final.set("id_slot", j.sl.id).set("model", s.c.alias)
	final.set("tokens_predicted", j.n).set("tokens_evaluated", j.nEval)
	final.set("generation_settings", params)
	final.set("prompt", "<s> "+j.prompt)
	final.set("tokens_cached", j.nEval+j.n-1)
	final.set("timings", tm)
	if j.stream {
		j.send(final)
		return
	}
	writeJSON(j.w, 200, toJSON(final))
}

// oaiChunk builds a /v1/completions chunk in the captured shape.
func (s *server) oaiChunk(text, finish string, created int64, id string) *object {
	src := s.t.oaiChunk
	if finish != "" {
		src = s.t.oaiFinal
	}
	o := clone(src).(*object)
	ch := o.get("choices").([]any)[0].(*object)
	ch.set("text", text)
	if finish != "" {
		ch.set("finish_reason", finish)
	}
	o.set("created", created).set("model", s.c.alias).set("id", id)
	o.del("usage")
	o.del("timings")
	return o
}

// genSettings adjusts captured generation settings / slot params.
func (s *server) genSettings(tmpl *object, temp float64, nPredict int, stream bool) *object {
	g := clone(tmpl).(*object)
	g.set("temperature", temp)
	g.set("max_tokens", nPredict).set("n_predict", nPredict)
	g.set("stream", stream)
	if g.has("speculative.types") {
		g.set("speculative.types", s.c.specTypes())
	}
	if g.has("speculative.n_max") {
		g.set("speculative.n_max", s.c.nMax)
	}
	return g
}

// logRequest prints the per-request lines. nTokens is the slot's token
// count after the request (prompt + generated - 1), which both trees print
// on the release line (18 for the CPU captures' 3+16, 22 for the H200's 7+16).
func (s *server) logRequest(slot, task, promptN int, promptMS float64, n int, predMS float64, draftN, steps, nTokens, graphs int) {
	pps := 1e3 / promptMS * float64(promptN)
	tps := 1e3 / predMS * float64(n)
	if s.c.isNew() {
		pt := func(format string, a ...any) { s.slotf("I", "print_timing", slot, task, format, a...) }
		pt("prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)", promptMS, promptN, promptMS/float64(max(promptN, 1)), pps)
		pt("       eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)", predMS, n, predMS/float64(max(n, 1)), tps)
		pt("      total time = %10.2f ms / %5d tokens", promptMS+predMS, promptN+n)
		pt("   graphs reused = %10d", graphs)
		if draftN > 0 {
			mean := float64(draftN+steps) / float64(steps)
			pt("draft acceptance = %.5f (%5d accepted / %5d generated), mean len = %5.2f", 1.0, draftN, draftN, mean)
		}
		s.slotf("I", "release", slot, task, "stop processing: n_tokens = %d, truncated = 0", nTokens)
		return
	}
	fmt.Fprintf(s.log, "slot print_timing: id %2d | task %d | \nprompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n       eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n      total time = %10.2f ms / %5d tokens\n",
		slot, task, promptMS, promptN, promptMS/float64(max(promptN, 1)), pps, predMS, n, predMS/float64(max(n, 1)), tps, promptMS+predMS, promptN+n)
	if draftN > 0 {
		fmt.Fprintf(s.log, "draft acceptance rate = %.5f (%5d accepted / %5d generated)\n", 1.0, draftN, draftN)
	}
	fmt.Fprintf(s.log, "slot      release: id %2d | task %d | stop processing: n_tokens = %d, truncated = 0\n", slot, task, nTokens)
}

func randAlnum(n int) string {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = chars[int(b[i])%len(chars)]
	}
	return string(b)
}
