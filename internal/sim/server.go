package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/simcost"
)

// simTag ends every startup line so no reader mistakes the sim for mlxcel.
const simTag = "[speclaunch sim: simulated engine, not a measurement]"

// server holds one simulated engine's state.
type server struct {
	cfg     Config
	clk     Clock
	log     *logger
	model   string // basename of the target
	width   int    // width decoding runs at; 0 when speculation is off or declined
	kind    string
	created int64
	ready   atomic.Bool
	// slot admits cfg.Slots decodes at a time (one by default, as
	// mlxcel's max_batch_size=1).
	slot chan struct{}

	mu      sync.Mutex
	reqNum  uint64
	metrics counters
	// engineZ is this engine's draw of the between-engine effect.
	engineZ float64
	// cached holds the last token-array prompts evaluated, newest first: a
	// token-array prompt with cache_prompt reuses its longest common prefix.
	cached [][]int
}

type counters struct {
	promptTokens, predictedTokens int
	promptSeconds, predictSeconds float64
	decodes                       int
	processing                    int
	deferred                      int // waiting for a slot
	draftTokens, acceptedTokens   int
	drafts                        int
	perPos                        []int
}

func newServer(cfg Config, clk Clock, log *logger) *server {
	s := &server{cfg: cfg, clk: clk, log: log, model: cfg.modelID(), kind: cfg.kind(), slot: make(chan struct{}, max(1, cfg.Slots)),
		engineZ: simcost.EngineDraw(cfg.EngineSeed)}
	if w, _ := cfg.ResolveBlockSize(); w >= 2 && !cfg.Decline {
		s.width = w
		s.metrics.perPos = make([]int, w-1)
	}
	s.created = clk.Now().Unix()
	return s
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /v1/health", s.health)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/completions", s.v1Completions)
	mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)
	mux.HandleFunc("POST /completion", s.nativeCompletion)
	mux.HandleFunc("POST /completions", s.nativeCompletion) // mlxcel: native, not OpenAI
	mux.HandleFunc("GET /metrics", s.prometheus)
	mux.HandleFunc("GET /props", s.props)
	guarded := secret.Require(s.cfg.APIKeys, mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", "speclaunch-sim")
		if !s.ready.Load() {
			writeJSON(w, http.StatusServiceUnavailable, newAPIError(503, "unavailable_error", "Loading model"))
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// promptCacheSize is how many token-array prompts the sim keeps cached.
const promptCacheSize = 8

// promptCache works out a token-array prompt's prefill against the cached
// prompts, as llama-server does with cache_prompt and its host-memory
// prompt cache (a prompt evicted from the slot by other requests can still
// be restored): the longest common prefix with any cached prompt is reused,
// the rest evaluated (at least one token: a fully cached prompt still
// evaluates its last). Other prompts return nil. The caller holds the slot.
func (s *server) promptCache(req completionRequest) *promptEval {
	ids := promptTokenIDs(req.Prompt)
	if ids == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	common := 0
	if req.CachePrompt == nil || *req.CachePrompt {
		for _, prev := range s.cached {
			c := 0
			for c < len(prev) && c < len(ids) && prev[c] == ids[c] {
				c++
			}
			common = max(common, c)
		}
		common = min(common, len(ids)-1)
	}
	s.cached = append([][]int{ids}, s.cached...)
	if len(s.cached) > promptCacheSize {
		s.cached = s.cached[:promptCacheSize]
	}
	return &promptEval{New: len(ids) - common, Cached: common}
}

func (s *server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *server) models(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID        string         `json:"id"`
		Object    string         `json:"object"`
		Created   int64          `json:"created"`
		OwnedBy   string         `json:"owned_by"`
		Simulated bool           `json:"simulated"`
		Meta      map[string]any `json:"meta"`
	}
	body := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{"list", []model{{
		ID: s.model, Object: "model", Created: s.created, OwnedBy: "speclaunch-sim", Simulated: true,
		Meta: map[string]any{"engine": "speclaunch sim", "note": "simulated engine; its numbers are never a measurement"},
	}}}
	writeJSON(w, http.StatusOK, body)
}

func (s *server) props(w http.ResponseWriter, _ *http.Request) {
	var spec any
	if w0, from := s.cfg.ResolveBlockSize(); w0 > 0 {
		spec = map[string]any{
			"draft_model": filepath.Base(s.cfg.DraftModel), "draft_kind": s.kind,
			"n_max": w0 - 1, "block_size": w0, "block_size_from": from, "declined": s.cfg.Decline,
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"default_generation_settings": map[string]any{"n_ctx": 4096, "params": map[string]any{"n_predict": -1, "temperature": 0.8}},
		"total_slots":                 max(1, s.cfg.Slots),
		"model_alias":                 s.model,
		"model_path":                  s.cfg.Model,
		"build_info":                  "speclaunch-sim",
		"speculative":                 spec,
		"endpoint_metrics":            true,
		"endpoint_props":              true,
		"simulated":                   true,
	})
}

// decodeError is a request the sim refuses, with its HTTP status.
type decodeError struct {
	status int
	typ    string
	msg    string
}

// parseRequest decodes a completion body. "model" is optional, as on
// llama-server, which serves the model it loaded whatever the request names:
// a client written for llama-server must work against the sim unchanged.
func parseRequest(r *http.Request) (completionRequest, string, int, *decodeError) {
	var req completionRequest
	if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 16<<20)).Decode(&req); err != nil {
		return req, "", 0, &decodeError{http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("invalid JSON body: %v", err)}
	}
	prompt, err := promptText(req.Prompt)
	if err != nil {
		return req, "", 0, &decodeError{http.StatusBadRequest, "invalid_request_error", err.Error()}
	}
	n, err := req.budget()
	if err != nil {
		return req, "", 0, &decodeError{http.StatusBadRequest, "invalid_request_error", err.Error()}
	}
	return req, prompt, n, nil
}

// active is the number of requests decoding now.
func (s *server) active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.metrics.processing
}

// abort ends a request the engine cannot finish (the server stopping, or
// the client gone) as a stopped llama-server does: the connection drops
// mid-response. Returning instead ended a stream with a clean chunked close
// and no final event, and a queued request with an empty 200, which a
// client (and the proxy) took for complete answers.
func abort() { panic(http.ErrAbortHandler) }

// acquire waits for a decode slot and numbers the request.
func (s *server) acquire(r *http.Request) (plan, func(), error) {
	select {
	case s.slot <- struct{}{}:
	default: // every slot busy: deferred until one frees, as llama-server counts it
		s.mu.Lock()
		s.metrics.deferred++
		s.mu.Unlock()
		var err error
		select {
		case s.slot <- struct{}{}:
		case <-r.Context().Done():
			err = r.Context().Err()
		}
		s.mu.Lock()
		s.metrics.deferred--
		s.mu.Unlock()
		if err != nil {
			return plan{}, nil, err
		}
	}
	s.mu.Lock()
	num := s.reqNum
	s.reqNum++
	s.metrics.processing++
	s.mu.Unlock()
	p := plan{width: s.width, cost: s.cfg.Cost, seed: s.cfg.Seed, reqNum: num, slow: 1 + s.cfg.Drift*float64(num), active: s.active, engineZ: s.engineZ}
	release := func() {
		s.mu.Lock()
		s.metrics.processing--
		s.mu.Unlock()
		<-s.slot
	}
	return p, release, nil
}

// finish records a completed request in the counters and logs mlxcel's
// per-request lines when speculation ran.
func (s *server) finish(res result) {
	s.mu.Lock()
	m := &s.metrics
	m.promptTokens += res.PromptN
	m.predictedTokens += res.PredictedN
	m.promptSeconds += res.PromptMS / 1000
	m.predictSeconds += res.PredictedMS / 1000
	if res.PredictedN > 0 { // prefill, then one decode per round or classic step
		steps := res.PredictedN - 1
		if res.Rounds > 0 {
			steps = res.Rounds
		}
		m.decodes += 1 + steps
	}
	m.draftTokens += res.Proposed
	m.acceptedTokens += res.Accepted
	m.drafts += res.Rounds
	for i, c := range res.PerPos {
		if i < len(m.perPos) {
			m.perPos[i] += c
		}
	}
	s.mu.Unlock()
	if res.Rounds > 0 {
		s.log.diagnostics(s.width, res)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only our own types are marshalled; this is a bug
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
}

func writeDecodeError(w http.ResponseWriter, e *decodeError) {
	writeJSON(w, e.status, newAPIError(e.status, e.typ, e.msg))
}

// sse writes one "data: ..." event; flushing is the caller's, once a burst.
func sse(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("marshal event: %w", err)
	}
	_, err = fmt.Fprintf(w, "data: %s\n\n", b)
	return err
}

func startSSE(w http.ResponseWriter) *http.ResponseController {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return http.NewResponseController(w)
}
