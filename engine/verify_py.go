package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/promtext"
)

// vLLM's speculative counters (vllm/v1/spec_decode/metrics.py,
// SpecDecodingProm). They exist only when a speculative config is set; the
// per-position counter is created at startup with one `position` label per
// speculative token (range(num_speculative_tokens)), so its labels give the
// width before any request. prometheus_client exposes a counter named N as
// N_total. Every series carries model_name and engine labels
// (vllm/v1/metrics/loggers.py); the engine label is the data-parallel rank.
const (
	VLLMPerPosMetric   = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
	VLLMDraftsMetric   = "vllm:spec_decode_num_drafts_total"
	VLLMDraftTokMetric = "vllm:spec_decode_num_draft_tokens_total"
	VLLMAcceptedMetric = "vllm:spec_decode_num_accepted_tokens_total"
)

// VLLMSpec is what vLLM's /metrics says about speculation, summed over
// engines (data-parallel ranks).
type VLLMSpec struct {
	Present       bool      // the speculative families are exposed at all
	NumSpecTokens int       // position labels per engine (= num_speculative_tokens)
	Engines       int       // distinct engine labels seen
	AcceptedByPos []float64 // accepted tokens per draft position
	Drafts        float64   // verify steps that carried a draft
	DraftTokens   float64
	Accepted      float64
}

// MeanAcceptanceLength is vLLM's own mean acceptance length (bonus token
// included): 1 + accepted / drafts; 0 before any draft.
func (v VLLMSpec) MeanAcceptanceLength() float64 {
	if v.Drafts <= 0 {
		return 0
	}
	return 1 + v.Accepted/v.Drafts
}

// ParseVLLMMetrics reads vLLM's speculative counters from a Prometheus text
// exposition. Engines that disagree on the number of positions are an
// error; absent families give Present=false and no error.
func ParseVLLMMetrics(text string) (VLLMSpec, error) {
	var v VLLMSpec
	perEngine := map[string]map[int]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	ln := 0
	for sc.Scan() {
		ln++
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "vllm:spec_decode_") {
			continue
		}
		smp, ok, err := promtext.ParseLine(line)
		if err != nil {
			return VLLMSpec{}, fmt.Errorf("metrics line %d: %w", ln, err)
		}
		if !ok {
			continue
		}
		switch smp.Name {
		case VLLMPerPosMetric:
			pos, err := strconv.Atoi(smp.Labels["position"])
			if err != nil || pos < 0 {
				return VLLMSpec{}, fmt.Errorf("metrics line %d: %s needs a position label 0, 1, ..., got %q", ln, VLLMPerPosMetric, smp.Labels["position"])
			}
			e := smp.Labels["engine"]
			if perEngine[e] == nil {
				perEngine[e] = map[int]float64{}
			}
			perEngine[e][pos] += smp.Value
			v.Present = true
		case VLLMDraftsMetric:
			v.Drafts += smp.Value
			v.Present = true
		case VLLMDraftTokMetric:
			v.DraftTokens += smp.Value
			v.Present = true
		case VLLMAcceptedMetric:
			v.Accepted += smp.Value
			v.Present = true
		}
	}
	if err := sc.Err(); err != nil {
		return VLLMSpec{}, fmt.Errorf("reading metrics: %w", err)
	}
	engines := make([]string, 0, len(perEngine))
	for e := range perEngine {
		engines = append(engines, e)
	}
	sort.Strings(engines)
	v.Engines = len(engines)
	for i, e := range engines {
		n := len(perEngine[e])
		for p := range perEngine[e] {
			if p >= n {
				return VLLMSpec{}, fmt.Errorf("%s for engine %q has positions that are not 0..%d: a partial scrape?", VLLMPerPosMetric, e, n-1)
			}
		}
		if i > 0 && n != v.NumSpecTokens {
			return VLLMSpec{}, fmt.Errorf("%s: engine %q has %d positions but engine %q has %d", VLLMPerPosMetric, engines[0], v.NumSpecTokens, e, n)
		}
		v.NumSpecTokens = n
	}
	v.AcceptedByPos = make([]float64, v.NumSpecTokens)
	for _, e := range engines {
		for p, c := range perEngine[e] {
			v.AcceptedByPos[p] += c
		}
	}
	return v, nil
}

// VerifyVLLM reads the width a running vLLM runs from /metrics: the
// position labels of the per-position acceptance counter (width = labels +
// 1). No speculative families means vLLM runs without a speculative
// config: Observation{Speculative: false} and no error. No request is sent.
func VerifyVLLM(ctx context.Context, baseURL string, client *http.Client) (Observation, error) {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	base := strings.TrimRight(baseURL, "/")
	body, code, err := httpDo(ctx, client, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return Observation{}, fmt.Errorf("width check: GET %s/metrics: %w: is vLLM up and ready?", base, err)
	}
	if code != http.StatusOK {
		return Observation{}, fmt.Errorf("width check: GET %s/metrics: HTTP %d: %s: vLLM serves /metrics on its API port unless started without it", base, code, snippet(body))
	}
	v, err := ParseVLLMMetrics(string(body))
	if err != nil {
		return Observation{}, fmt.Errorf("width check: %s/metrics: %w", base, err)
	}
	if !v.Present {
		return Observation{Line: "vLLM exposes no vllm:spec_decode_* metrics: it runs without a speculative config"}, nil
	}
	if v.NumSpecTokens == 0 {
		return Observation{}, fmt.Errorf("width check: %s/metrics has vllm:spec_decode_* counters but no %s positions: %w", base, VLLMPerPosMetric, ErrNotLive)
	}
	o := Observation{Speculative: true, Width: v.NumSpecTokens + 1,
		From: fmt.Sprintf("/metrics %s: %d positions = num_speculative_tokens %d", VLLMPerPosMetric, v.NumSpecTokens, v.NumSpecTokens)}
	o.Line = fmt.Sprintf("vLLM drafts: width %d (%s)", o.Width, o.From)
	if v.Drafts > 0 {
		o.Line += fmt.Sprintf("; mean acceptance length %.2f over %.0f drafts", v.MeanAcceptanceLength(), v.Drafts)
	}
	return o, nil
}

// SGLangInfo is what SGLang's /server_info (older trees: /get_server_info)
// says about speculation. The endpoint returns the ServerArgs dataclass
// fields, the scheduler info and internal_states per data-parallel rank
// (python/sglang/srt/entrypoints/http_server.py).
type SGLangInfo struct {
	Algorithm      string // "" when speculation is off
	NumSteps       int
	EagleTopK      int
	NumDraftTokens int
	Version        string
	// AvgAcceptLength is internal_states[*].avg_spec_accept_length, averaged
	// over ranks that report it; 0 when none does.
	AvgAcceptLength float64
}

// Width is num_draft_tokens: the tokens one verify pass scores.
func (i SGLangInfo) Width() int { return i.NumDraftTokens }

// ParseSGLangServerInfo reads the speculative fields of SGLang's
// /server_info JSON.
func ParseSGLangServerInfo(body []byte) (SGLangInfo, error) {
	var raw struct {
		Algorithm      *string           `json:"speculative_algorithm"`
		NumSteps       *int              `json:"speculative_num_steps"`
		EagleTopK      *int              `json:"speculative_eagle_topk"`
		NumDraftTokens *int              `json:"speculative_num_draft_tokens"`
		Version        string            `json:"version"`
		States         []json.RawMessage `json:"internal_states"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return SGLangInfo{}, fmt.Errorf("server info is not the JSON object SGLang serves: %w", err)
	}
	if raw.Version == "" && raw.Algorithm == nil && raw.NumDraftTokens == nil {
		return SGLangInfo{}, fmt.Errorf("server info has neither version nor speculative_* fields: is this SGLang's /server_info?")
	}
	i := SGLangInfo{Version: raw.Version}
	if raw.Algorithm != nil {
		i.Algorithm = *raw.Algorithm
	}
	deref := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	i.NumSteps, i.EagleTopK, i.NumDraftTokens = deref(raw.NumSteps), deref(raw.EagleTopK), deref(raw.NumDraftTokens)
	if i.Algorithm != "" && i.NumDraftTokens < 1 {
		return SGLangInfo{}, fmt.Errorf("server info says speculative_algorithm %q but speculative_num_draft_tokens %d: SGLang resolves it at startup, so this is not a running SGLang's answer", i.Algorithm, i.NumDraftTokens)
	}
	var sum float64
	var n int
	for _, st := range raw.States {
		var s struct {
			Avg *float64 `json:"avg_spec_accept_length"`
		}
		if json.Unmarshal(st, &s) == nil && s.Avg != nil {
			sum += *s.Avg
			n++
		}
	}
	if n > 0 {
		i.AvgAcceptLength = sum / float64(n)
	}
	return i, nil
}

// VerifySGLang reads the width a running SGLang runs from /server_info
// (falling back to /get_server_info, its older name): speculative_algorithm
// null means no speculation; otherwise width = speculative_num_draft_tokens.
// A draft tree (eagle topk > 1) is reported as such: its num_draft_tokens
// is a verify budget, not a chain the launcher set.
func VerifySGLang(ctx context.Context, baseURL string, client *http.Client) (Observation, error) {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	base := strings.TrimRight(baseURL, "/")
	var body []byte
	var lastErr error
	path := ""
	for _, p := range []string{"/server_info", "/get_server_info"} {
		b, code, err := httpDo(ctx, client, http.MethodGet, base+p, nil)
		if err != nil {
			return Observation{}, fmt.Errorf("width check: GET %s%s: %w: is SGLang up and ready?", base, p, err)
		}
		if code == http.StatusOK {
			body, path = b, p
			break
		}
		lastErr = fmt.Errorf("width check: GET %s%s: HTTP %d: %s", base, p, code, snippet(b))
	}
	if body == nil {
		return Observation{}, lastErr
	}
	info, err := ParseSGLangServerInfo(body)
	if err != nil {
		return Observation{}, fmt.Errorf("width check: %s%s: %w", base, path, err)
	}
	if info.Algorithm == "" {
		return Observation{Line: fmt.Sprintf("SGLang %s reports speculative_algorithm null: it runs without speculation", info.Version)}, nil
	}
	o := Observation{Speculative: true, Kind: info.Algorithm, Width: info.Width(),
		From: fmt.Sprintf("%s speculative_num_draft_tokens = %d", path, info.NumDraftTokens)}
	if info.EagleTopK > 1 && info.Algorithm != "NGRAM" {
		o.From += fmt.Sprintf(" (a draft tree: topk %d, %d steps)", info.EagleTopK, info.NumSteps)
	}
	o.Line = fmt.Sprintf("SGLang %s drafts with %s: width %d (%s)", info.Version, info.Algorithm, o.Width, o.From)
	if info.AvgAcceptLength > 0 {
		o.Line += fmt.Sprintf("; average accept length %.2f", info.AvgAcceptLength)
	}
	return o, nil
}
