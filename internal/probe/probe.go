// Package probe measures an engine's verify cost by rows (Run, Curve): the
// probe the adaptive width (internal/serve's shell of internal/control)
// and bench's probe check (internal/bench) send to a running
// llama-server-style engine. It was part of internal/adapt, which bench
// imported for it alone.
package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Probe settings. The prefix is long enough that W fresh tokens after it
// run the same kernels as a verify step deep in a conversation, and short
// enough to cache in a moment. Token ids 1000+ exist in every vocabulary
// the engines load (the smallest, the golden captures' toy model, is only
// used with the sim).
const (
	probePrefixLen  = 64
	probePrefixBase = 1000
	probeFreshBase  = 2000
	probeFreshSpan  = 8000 // 37 is coprime with it: 8000 distinct first tokens
	DefaultReps     = 7
	// DefaultTimeout bounds a whole probe: on the H200 all widths took
	// about a second.
	DefaultTimeout = 30 * time.Second
)

// errNotCached: the prefix was not reused from the slot's cache.
var errNotCached = errors.New("the probe's prefix was not reused from the cache")

// A probe whose prefix live traffic keeps evicting measures the rest of
// its rows without one: w fresh tokens, cache_prompt false, on whichever
// slot the engine frees first (id_slot -1). On an H100 (llama-server
// d32676d, four clients on four slots) a client's request took slot 0
// between every warm-up and its measured request, and the probe under
// load never measured a row (docs/benchmark_results/
// h100-follow-2026-12-06.md, "The probe under load still fails"). Under
// load the engine batches those rows with the live requests', so a row
// count's time includes theirs: a price of that load, higher than the
// idle one, which makes the controller's predictions at that load more
// cautious, not less.
const anySlot = -1

// bareAfter is the lost races of one sample after which the probe goes
// bare: one eviction is re-warmed (live traffic at a low load), a second
// says every slot is busy. Each race waits for slot 0's own request to
// end: about a second at four clients on the H100 run of 2026-12-06b
// (200-token requests at about 195 tok/s each), of a 30 s bound.
const bareAfter = 2

// errOutput: the engine failed on the one token the probe generated,
// not on the prompt. llama-server d32676d answers 500 "The model produced
// output that does not match the expected Content-only format" when that
// token is not valid UTF-8 on its own (a byte token); on an H200 with a
// synthetic pair it did so 3 times in some 400 probe requests, and the
// first ended the probe before traffic. The timing is lost, not the
// engine: the same rows with other fresh tokens usually pass.
var errOutput = errors.New("the engine could not render the probe's generated token")

// outputRefused is the text of errOutput's answer.
const outputRefused = "does not match the expected"

// probeRetries bounds re-warming the prefix after a cache miss, and
// changing the prompt after errOutput.
const probeRetries = 4

// probeGraphWarm is the requests of one row count discarded after a change
// of shape. ggml's CUDA backend runs a graph directly on its first call of a
// new shape and captures it on the second; decoding at a fixed width replays
// it. On an H200 (llama-server d32676d) a probe that changed the row count
// on every request priced 2-8 rows at 4.2-4.4 ms, above the 2.9 ms that a
// whole width-2 cycle measured.
const probeGraphWarm = 2

// ErrUnsupported says the engine cannot be probed: it lacks the token-array
// /completion with prompt timings the probe needs (mlxcel-server).
var ErrUnsupported = errors.New("the engine cannot be probed for its verify cost")

// Run measures the verify cost by rows on a running llama-server-style
// engine, without restarting it: for each row count W it sends
// POST /completion with a token-array prompt of a fixed prefix (sent once
// first, so it is cached) plus W fresh tokens, n_predict 1, cache_prompt
// true and id_slot 0 (one slot's cache), and reads timings.prompt_ms,
// checking timings.prompt_n == W. reps repetitions per W, median, sent
// back to back after probeGraphWarm discarded ones (see there). Cut short
// (ctx ended while live traffic held the slot), it returns the row counts
// probed whole beside the error.
func Run(ctx context.Context, client *http.Client, baseURL string, rows []int, reps int) (Curve, error) {
	var st probeState
	err := st.probe(ctx, client, baseURL, rows, reps)
	c := curveOf(st.samples)
	if err != nil {
		c = curveOf(st.whole(reps)) // the row counts probed whole are kept
	}
	c.Bare = st.bare
	return c, err
}

// probeState is a probe's progress: the samples by row count and the
// requests sent, so that a probe cut short (its bound passed while live
// traffic held the slot) resumes where it stopped, every request's first
// fresh token still one no earlier request had.
type probeState struct {
	samples map[int][]float64
	turn    int
	// bare: live traffic kept evicting the prefix, so the rest of the
	// rows are measured without one (anySlot).
	bare bool
}

// whole is the samples of the row counts probed all reps times.
func (st *probeState) whole(reps int) map[int][]float64 {
	if reps <= 0 {
		reps = DefaultReps
	}
	out := map[int][]float64{}
	for w, s := range st.samples {
		if len(s) >= reps {
			out[w] = s
		}
	}
	return out
}

// curveOf is the probed curve: the median of each row count's samples.
func curveOf(samples map[int][]float64) Curve {
	c := Curve{VerifyMS: map[int]float64{}, Source: "probe"}
	for w, s := range samples {
		c.VerifyMS[w] = median(s)
	}
	return c
}

// probe is Probe adding to st, skipping the repetitions it already holds.
func (st *probeState) probe(ctx context.Context, client *http.Client, baseURL string, rows []int, reps int) error {
	if client == nil {
		client = http.DefaultClient
	}
	if reps <= 0 {
		reps = DefaultReps
	}
	if len(rows) == 0 {
		return errors.New("probe: no rows to probe")
	}
	for _, w := range rows {
		if w < 1 {
			return fmt.Errorf("probe: row count %d is not positive", w)
		}
	}
	base := strings.TrimRight(baseURL, "/")
	ids := tokenIDs(vocabSize(ctx, client, base))
	prefix := make([]int, probePrefixLen)
	for i := range prefix {
		prefix[i] = ids.prefix + i
	}
	// Warm the cache with the prefix alone (plus one token, evaluated:
	// the last id, or after errOutput one of the prefix's, neither of which
	// starts a measured request).
	warm := func() error {
		last := ids.fresh + ids.span
		for try := 0; ; try++ {
			_, err := probeOnce(ctx, client, base, append(slices.Clone(prefix), last), -1, 0)
			if !errors.Is(err, errOutput) || try == probeRetries {
				return err
			}
			last = prefix[try]
		}
	}
	if err := warm(); err != nil {
		return err
	}
	if st.samples == nil {
		st.samples = map[int][]float64{}
	}
	measure := func() error {
		for _, w := range rows {
			streak := 0 // requests of w rows in a row (probeGraphWarm)
			for len(st.samples[w]) < reps {
				ms, err := st.sample(ctx, client, base, prefix, ids, w, warm, &streak)
				if err != nil {
					return fmt.Errorf("probe %d rows (sample %d): %w", w, len(st.samples[w])+1, err)
				}
				if streak++; streak > probeGraphWarm {
					st.samples[w] = append(st.samples[w], ms)
				}
			}
		}
		return nil
	}
	err := measure()
	if errors.Is(err, errNotCached) && !st.bare {
		// The prefix lost the races: measure without it (anySlot), every
		// row count again, so that one curve is of one kind.
		st.bare = true
		clear(st.samples)
		err = measure()
	}
	return err
}

// sample measures one request of w rows, retrying what may pass another
// time: errOutput with other fresh tokens, and a prefix evicted by live
// traffic by warming it again, once (bareAfter); a warm-up resets streak.
// errNotCached from it, not bare, says the prefix lost its races.
func (st *probeState) sample(ctx context.Context, client *http.Client, base string, prefix []int, ids probeIDs, w int, warm func() error, streak *int) (float64, error) {
	prompt := st.prompt(prefix, ids, w)
	ms, err := st.once(ctx, client, base, prompt, w)
	lost := 0 // races for slot 0's cache lost by this sample
	for try := 0; try < probeRetries && (errors.Is(err, errOutput) || errors.Is(err, errNotCached)); try++ {
		if errors.Is(err, errOutput) || st.bare {
			// Other fresh tokens, the same rows.
			prompt = st.prompt(prefix, ids, w)
			ms, err = st.once(ctx, client, base, prompt, w)
			continue
		}
		// Live traffic may have taken the slot between two probes and
		// evicted the prefix: warm it again, once before going bare
		// (bareAfter).
		if lost++; lost >= bareAfter {
			break
		}
		err = warm()
		*streak = 0 // the warm-up ran another shape, refused or not
		if err == nil {
			ms, err = st.once(ctx, client, base, prompt, w)
		}
	}
	return ms, err
}

// once sends one measured request of w rows: pinned to slot 0's cached
// prefix, or bare (anySlot).
func (st *probeState) once(ctx context.Context, client *http.Client, base string, prompt []int, w int) (float64, error) {
	if st.bare {
		return probeOnce(ctx, client, base, prompt, w, anySlot)
	}
	return probeOnce(ctx, client, base, prompt, w, 0)
}

// prompt is the next request of w rows: the prefix (none when bare) and w
// fresh tokens, the first of which no earlier request had after the
// prefix, so only the prefix is reused.
func (st *probeState) prompt(prefix []int, ids probeIDs, w int) []int {
	st.turn++
	if st.bare {
		prefix = nil
	}
	p := slices.Clone(prefix)
	for i := range w {
		p = append(p, ids.fresh+(st.turn*37+i)%ids.span)
	}
	return p
}

// probeIDs are the token ids a probe uses: a prefix run and a span of
// fresh ids, all inside the target's vocabulary.
type probeIDs struct{ prefix, fresh, span int }

// tokenIDs places the probe's ids inside a vocabulary of n tokens (0 =
// unknown: the defaults, which fit every vocabulary of 10,000 or more). A
// small vocabulary (a synthetic pair's 8,192 on the H200 refused id 9,000
// with "Prompt contains invalid tokens") gets ids from a quarter of the way
// in, and a fresh span that 37 does not divide, so consecutive requests
// still start with distinct tokens.
func tokenIDs(n int) probeIDs {
	if n <= 0 || n > probeFreshBase+probeFreshSpan {
		return probeIDs{probePrefixBase, probeFreshBase, probeFreshSpan}
	}
	lo := min(probePrefixBase, n/4)
	fresh := lo + probePrefixLen
	span := n - fresh - 1 // the last id is the warm-up's, outside the span
	if span%37 == 0 {
		span--
	}
	return probeIDs{lo, fresh, max(span, 1)}
}

// vocabSize reads n_vocab from llama-server's /v1/models (data[0].meta);
// 0 when the engine does not say.
func vocabSize(ctx context.Context, client *http.Client, base string) int {
	var v struct {
		Data []struct {
			Meta struct {
				NVocab int `json:"n_vocab"`
			} `json:"meta"`
		} `json:"data"`
	}
	if getJSON(ctx, client, base+"/v1/models", &v) != nil || len(v.Data) == 0 {
		return 0
	}
	return max(v.Data[0].Meta.NVocab, 0)
}

// getJSON decodes a GET of url answered 200 into v, reading at most 1 MiB.
func getJSON(ctx context.Context, client *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s answered %s", req.URL.Path, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v); err != nil {
		return fmt.Errorf("GET %s: not JSON: %w", req.URL.Path, err)
	}
	return nil
}

// probeOnce sends one probe request and returns timings.prompt_ms;
// wantNew < 0 skips the prompt_n check (the warm-up). slot 0 reuses slot
// 0's cache (cache_prompt); anySlot evaluates the whole prompt on any slot.
func probeOnce(ctx context.Context, client *http.Client, base string, prompt []int, wantNew, slot int) (float64, error) {
	body, _ := json.Marshal(map[string]any{
		"prompt": prompt, "n_predict": 1, "cache_prompt": slot != anySlot, "temperature": 0, "id_slot": slot, "stream": false,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/completion", bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("probe: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("probe: POST /completion: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, fmt.Errorf("probe: POST /completion: reading the reply: %w", err)
	}
	if resp.StatusCode == http.StatusInternalServerError && bytes.Contains(raw, []byte(outputRefused)) {
		return 0, fmt.Errorf("%w: POST /completion answered %s: %s", errOutput, resp.Status, snippet(raw))
	}
	if resp.StatusCode >= 500 {
		// Loading, overloaded or restarting (llama-server answers 503
		// while it loads a model): it may pass.
		return 0, fmt.Errorf("probe: POST /completion answered %s: %s", resp.Status, snippet(raw))
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%w: POST /completion answered %s: %s", ErrUnsupported, resp.Status, snippet(raw))
	}
	var out struct {
		Timings *struct {
			PromptN  *int     `json:"prompt_n"`
			PromptMS *float64 `json:"prompt_ms"`
		} `json:"timings"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return 0, fmt.Errorf("%w: POST /completion did not answer JSON: %s", ErrUnsupported, snippet(raw))
	}
	if out.Timings == nil || out.Timings.PromptN == nil || out.Timings.PromptMS == nil {
		return 0, fmt.Errorf("%w: POST /completion reply has no timings.prompt_n/prompt_ms: %s", ErrUnsupported, snippet(raw))
	}
	if wantNew >= 0 && *out.Timings.PromptN != wantNew {
		return 0, fmt.Errorf("%w: timings.prompt_n is %d, want %d new tokens (cache_prompt off, or other requests took the slot)", errNotCached, *out.Timings.PromptN, wantNew)
	}
	if ms := *out.Timings.PromptMS; ms > 0 {
		return ms, nil
	}
	return 0, fmt.Errorf("timings.prompt_ms is %v, want > 0", *out.Timings.PromptMS)
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}

func median(s []float64) float64 {
	s = slices.Sorted(slices.Values(s))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
