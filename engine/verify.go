package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/promtext"
)

// Timings is the `timings` object of a llama-server (or mlxcel) completion.
// The draft fields are present only when something was drafted (HasDraft).
type Timings struct {
	PromptN            int
	PromptMS           float64
	PredictedN         int
	PredictedMS        float64
	PredictedPerSecond float64
	DraftN             int
	DraftAccepted      int
	DraftRounds        int // mlxcel only; llama.cpp does not report rounds
	HasDraft           bool
}

type rawTimings struct {
	PromptN            *float64 `json:"prompt_n"`
	PromptMS           *float64 `json:"prompt_ms"`
	PredictedN         *float64 `json:"predicted_n"`
	PredictedMS        *float64 `json:"predicted_ms"`
	PredictedPerSecond *float64 `json:"predicted_per_second"`
	DraftN             *float64 `json:"draft_n"`
	DraftAccepted      *float64 `json:"draft_n_accepted"`
	DraftRounds        *float64 `json:"draft_rounds"`
}

func num(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// ParseTimings reads the timings of a completion response: body is either
// a whole response (native /completion, its final stream event, or an
// OpenAI chunk) with a "timings" object, or the timings object itself. An
// SSE line's "data: " prefix is accepted.
func ParseTimings(body []byte) (Timings, error) {
	body = bytes.TrimSpace(body)
	body = bytes.TrimPrefix(body, []byte("data:"))
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(body, &outer); err != nil {
		return Timings{}, fmt.Errorf("completion response is not a JSON object: %w", err)
	}
	raw := body
	if t, ok := outer["timings"]; ok {
		raw = t
	} else if _, ok := outer["predicted_n"]; !ok {
		return Timings{}, fmt.Errorf("completion response has no timings object: is this a llama-server /completion response?")
	}
	var rt rawTimings
	if err := json.Unmarshal(raw, &rt); err != nil {
		return Timings{}, fmt.Errorf("completion timings: %w", err)
	}
	t := Timings{
		PromptN:            int(num(rt.PromptN)),
		PromptMS:           num(rt.PromptMS),
		PredictedN:         int(num(rt.PredictedN)),
		PredictedMS:        num(rt.PredictedMS),
		PredictedPerSecond: num(rt.PredictedPerSecond),
		DraftN:             int(num(rt.DraftN)),
		DraftAccepted:      int(num(rt.DraftAccepted)),
		DraftRounds:        int(num(rt.DraftRounds)),
		HasDraft:           rt.DraftN != nil,
	}
	if t.DraftN < 0 || t.DraftAccepted < 0 || t.DraftAccepted > t.DraftN {
		return Timings{}, fmt.Errorf("completion timings are inconsistent: draft_n %d, draft_n_accepted %d", t.DraftN, t.DraftAccepted)
	}
	return t, nil
}

// PerPosMetric is the 2026 llama-server counter whose position labels are
// sized to n_max once something was drafted.
const PerPosMetric = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"

// ParseMetricsPositions counts the distinct `position` labels of
// llamacpp:spec_decode_num_accepted_tokens_per_pos_total in a Prometheus
// text exposition: n_max of a 2026 llama-server after a drafted request
// (width = positions + 1). 0 with no error when the family is absent.
func ParseMetricsPositions(text string) (int, error) {
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	ln := 0
	for sc.Scan() {
		ln++
		line := strings.TrimSpace(sc.Text())
		rest, mine := strings.CutPrefix(line, PerPosMetric)
		if !mine || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue // another family (or a longer name with this prefix)
		}
		smp, _, err := promtext.ParseLine(line)
		if err != nil {
			return 0, fmt.Errorf("metrics line %d: %w", ln, err)
		}
		if len(smp.Labels) == 0 {
			return 0, fmt.Errorf("metrics line %d: %s has no labels: want {position=\"N\"}", ln, PerPosMetric)
		}
		pos := smp.Labels["position"]
		if _, err := strconv.Atoi(pos); err != nil {
			return 0, fmt.Errorf("metrics line %d: %s needs a numeric position label, got %q", ln, PerPosMetric, pos)
		}
		seen[pos] = true
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading metrics: %w", err)
	}
	return len(seen), nil
}

type slotJSON struct {
	ID     int                        `json:"id"`
	Params map[string]json.RawMessage `json:"params"`
}

func parseSlots(body []byte) ([]slotJSON, error) {
	var slots []slotJSON
	if err := json.Unmarshal(body, &slots); err != nil {
		return nil, fmt.Errorf("/slots is not a JSON array of slots: %w", err)
	}
	return slots, nil
}

func slotNMax(s slotJSON) (int, bool, error) {
	raw, ok := s.Params["speculative.n_max"]
	if !ok {
		return 0, false, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f != float64(int(f)) {
		return 0, false, fmt.Errorf("slot %d: speculative.n_max is not an integer: %s", s.ID, raw)
	}
	return int(f), true, nil
}

// ParseSlotsNMax reads params."speculative.n_max" from an older
// llama-server's /slots. Only slots that served a request carry params; they
// must agree. Use ParseSlotNMax when the serving slot is known.
func ParseSlotsNMax(body []byte) (int, error) {
	slots, err := parseSlots(body)
	if err != nil {
		return 0, err
	}
	n, found := 0, false
	for _, s := range slots {
		v, ok, err := slotNMax(s)
		if err != nil {
			return 0, err
		}
		if !ok {
			continue
		}
		if found && v != n {
			return 0, fmt.Errorf("/slots disagree on speculative.n_max (%d and %d): read the slot that served the probe (ParseSlotNMax)", n, v)
		}
		n, found = v, true
	}
	if !found {
		return 0, fmt.Errorf("/slots has no speculative.n_max: no slot has served a request yet, or this llama-server is a 2026 tree (read /metrics instead)")
	}
	return n, nil
}

// ParseSlotNMax reads params."speculative.n_max" of slot id from /slots.
func ParseSlotNMax(body []byte, id int) (int, error) {
	slots, err := parseSlots(body)
	if err != nil {
		return 0, err
	}
	for _, s := range slots {
		if s.ID != id {
			continue
		}
		v, ok, err := slotNMax(s)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, fmt.Errorf("/slots: slot %d has no speculative.n_max in its params: a 2026 llama-server does not report it (read /metrics instead)", id)
		}
		return v, nil
	}
	return 0, fmt.Errorf("/slots has no slot %d", id)
}

// ProbeBody is the request VerifyLlama sends to /completion.
const ProbeBody = `{"prompt":"def fib(n):","n_predict":16,"temperature":0,"stream":false}`

const maxBody = 16 << 20

func httpDo(ctx context.Context, client *http.Client, method, url string, body []byte) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("reading %s %s: %w", method, url, err)
	}
	return b, resp.StatusCode, nil
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// ErrNotLive is wrapped by VerifyLlama errors where speculation was expected
// to be measurable but the counters did not show it.
var ErrNotLive = errors.New("speculation is not measurable")

// VerifyLlama asks a running llama-server what width it runs: it sends a
// short greedy completion (ProbeBody); timings.draft_n > 0 means
// speculation is live. Then, on 2026 trees, it counts the position labels
// of llamacpp:spec_decode_num_accepted_tokens_per_pos_total in /metrics
// (width = labels + 1); on legacy trees it reads params."speculative.n_max"
// of the slot that served the probe in /slots (width = n_max + 1); with an
// unknown spelling it tries /metrics, then /slots. No draft_n means
// Observation{Speculative: false} with a message saying so, and no error.
func VerifyLlama(ctx context.Context, baseURL string, sp Spelling, client *http.Client) (Observation, error) {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Minute}
	}
	v := &llamaProbe{ctx: ctx, client: client, base: strings.TrimRight(baseURL, "/")}
	t, meta, err := v.complete()
	if err != nil {
		return Observation{}, err
	}
	kind := meta.draftKind()
	if !t.HasDraft || t.DraftN == 0 {
		msg := "speculation is not live: the probe completion reported no draft_n, so nothing was drafted"
		switch sp {
		case Spelling2026, SpellingUnknown:
			msg += " (a 2026 llama-server given a draft model without --spec-type draft-… loads it and drafts nothing)"
		}
		return Observation{Speculative: false, Kind: kind, Line: msg}, nil
	}
	o := Observation{Speculative: true, Kind: kind}
	if err := v.width(&o, sp, t, meta.IDSlot); err != nil {
		return Observation{}, err
	}
	o.Line = fmt.Sprintf("llama-server drafts: probe drafted %d, accepted %d; width %d (%s)", t.DraftN, t.DraftAccepted, o.Width, o.From)
	return o, nil
}

// llamaProbe is one VerifyLlama's connection to the server.
type llamaProbe struct {
	ctx    context.Context
	client *http.Client
	base   string // the server's URL without a trailing slash
}

// probeMeta is what VerifyLlama reads of the probe's response besides its
// timings; both fields are optional.
type probeMeta struct {
	IDSlot *int `json:"id_slot"`
	GS     struct {
		Types string `json:"speculative.types"`
	} `json:"generation_settings"`
}

// draftKind is the last draft-* type the server lists, "" when none.
func (m probeMeta) draftKind() string {
	kind := ""
	for _, ty := range strings.Split(m.GS.Types, ",") {
		if strings.HasPrefix(ty, "draft-") {
			kind = ty
		}
	}
	return kind
}

// complete sends the probe completion and reads its timings and metadata.
func (v *llamaProbe) complete() (Timings, probeMeta, error) {
	body, code, err := httpDo(v.ctx, v.client, http.MethodPost, v.base+"/completion", []byte(ProbeBody))
	if err != nil {
		return Timings{}, probeMeta{}, fmt.Errorf("width probe: POST %s/completion: %w: is llama-server up and ready?", v.base, err)
	}
	if code != http.StatusOK {
		return Timings{}, probeMeta{}, fmt.Errorf("width probe: POST %s/completion: HTTP %d: %s: wait until /health answers 200", v.base, code, snippet(body))
	}
	t, err := ParseTimings(body)
	if err != nil {
		return Timings{}, probeMeta{}, fmt.Errorf("width probe: %w", err)
	}
	var meta probeMeta
	_ = json.Unmarshal(body, &meta) // optional fields
	return t, meta, nil
}

// width sets o's width from the counter the spelling has: /metrics on
// 2026 trees, /slots on legacy ones, /metrics then /slots when unknown.
func (v *llamaProbe) width(o *Observation, sp Spelling, t Timings, idSlot *int) error {
	switch sp {
	case Spelling2026:
		ok, err := v.fromMetrics(o)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("width probe: %s drafted %d tokens but /metrics has no %s labels: %w (is this llama-server older than its --help suggests?)", v.base, t.DraftN, PerPosMetric, ErrNotLive)
		}
	case SpellingLegacy:
		return v.fromSlots(o, idSlot)
	default:
		ok, merr := v.fromMetrics(o)
		if !ok {
			if err := v.fromSlots(o, idSlot); err != nil {
				if merr != nil {
					return fmt.Errorf("%w; and %w", merr, err)
				}
				return err
			}
		}
	}
	return nil
}

// fromMetrics counts the per-position acceptance labels in /metrics
// (width = positions + 1); false when there are none.
func (v *llamaProbe) fromMetrics(o *Observation) (bool, error) {
	mb, code, err := httpDo(v.ctx, v.client, http.MethodGet, v.base+"/metrics", nil)
	if err != nil {
		return false, fmt.Errorf("width probe: GET %s/metrics: %w", v.base, err)
	}
	if code != http.StatusOK {
		return false, fmt.Errorf("width probe: GET %s/metrics: HTTP %d: %s: start llama-server with --metrics", v.base, code, snippet(mb))
	}
	n, err := ParseMetricsPositions(string(mb))
	if err != nil {
		return false, fmt.Errorf("width probe: %s/metrics: %w", v.base, err)
	}
	if n == 0 {
		return false, nil
	}
	o.Width = n + 1
	o.From = fmt.Sprintf("/metrics %s: %d positions = n_max %d", PerPosMetric, n, n)
	return true, nil
}

// fromSlots reads speculative.n_max of the slot that served the probe (any
// slot when the response did not say) from /slots (width = n_max + 1).
func (v *llamaProbe) fromSlots(o *Observation, idSlot *int) error {
	sb, code, err := httpDo(v.ctx, v.client, http.MethodGet, v.base+"/slots", nil)
	if err != nil {
		return fmt.Errorf("width probe: GET %s/slots: %w", v.base, err)
	}
	if code != http.StatusOK {
		return fmt.Errorf("width probe: GET %s/slots: HTTP %d: %s: do not pass --no-slots", v.base, code, snippet(sb))
	}
	var n int
	if idSlot != nil && *idSlot >= 0 {
		n, err = ParseSlotNMax(sb, *idSlot)
	} else {
		n, err = ParseSlotsNMax(sb)
	}
	if err != nil {
		return fmt.Errorf("width probe: %w", err)
	}
	if n < 1 {
		return fmt.Errorf("width probe: /slots reports speculative.n_max %d, which drafts nothing: %w", n, ErrNotLive)
	}
	o.Width = n + 1
	o.From = fmt.Sprintf("/slots params speculative.n_max = %d", n)
	if o.Kind == "" {
		o.Kind = "draft"
	}
	return nil
}
