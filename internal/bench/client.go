package bench

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

	"github.com/speclaunch/speclaunch/internal/jsonstr"
	"github.com/speclaunch/speclaunch/internal/promtext"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// completionRequest is the body of every request: greedy unless a
// temperature is given, a fixed token count regardless of EOS, streamed,
// with the prompt cached after the warm-up so that measured requests time
// decode, not prefill.
type completionRequest struct {
	Prompt      string  `json:"prompt"`
	NPredict    int     `json:"n_predict"`
	Temperature float64 `json:"temperature"`
	TopK        *int    `json:"top_k,omitempty"` // 1 when greedy; the engine's own when sampling
	IgnoreEOS   bool    `json:"ignore_eos"`
	Stream      bool    `json:"stream"`
	CachePrompt bool    `json:"cache_prompt"`
	Seed        int64   `json:"seed"`
	Model       string  `json:"model,omitempty"`
}

// requestBody renders a greedy request for prompt and maxTokens; model is
// set only when the engine named one (the native endpoint does not need it).
func requestBody(prompt string, maxTokens int, model string) []byte {
	return sampledBody(prompt, maxTokens, model, 0, DefaultSeed)
}

// sampledBody renders a request at temperature temp (0 = greedy, top_k 1)
// with the given seed.
func sampledBody(prompt string, maxTokens int, model string, temp float64, seed int64) []byte {
	req := completionRequest{Prompt: prompt, NPredict: maxTokens, Temperature: temp,
		IgnoreEOS: true, Stream: true, CachePrompt: true, Seed: seed, Model: model}
	if temp == 0 {
		one := 1
		req.TopK = &one
	}
	b, err := json.Marshal(req)
	if err != nil { // cannot happen: every field is a plain value
		panic(err)
	}
	return b
}

// result is one request as the client saw it.
type result struct {
	start            time.Time // when the request was sent (the client's clock)
	wall, ttft       time.Duration
	promptN, cacheN  int
	promptMS         float64
	tokens           int // from the final timings, not from the events
	tokensFrom       string
	predictedMS      float64
	predictedPerS    float64
	draftN, draftAcc int
	draftRounds      int
	text             string
	pieces           int
	pieceEnds        []int32 // byte offset in text where each streamed piece ends
	err              error
}

// client is a streaming /completion client built to cost little per token:
// one scanner buffer and one text buffer reused across requests, content
// events decoded by hand (no reflection, no allocation), and encoding/json
// only for the final and error events, whose shape varies by engine.
type client struct {
	http    *http.Client
	tr      *http.Transport
	timeout time.Duration

	scanBuf []byte
	text    []byte
	ends    []int32
	ev      event
}

func newClient(timeout time.Duration) *client {
	tr := &http.Transport{
		Proxy: nil, // loopback only: never through a proxy from the environment
		// One connection per request: llama-server d32676d closes a
		// streamed connection shortly after the answer while advertising
		// keep-alive, and a request sent on it is lost (docs/engines.md).
		// The loopback dial falls inside the measured time to first token:
		// tens of microseconds against its milliseconds.
		DisableKeepAlives:  true,
		DisableCompression: true,
	}
	return &client{
		http:    &http.Client{Transport: tr},
		tr:      tr,
		timeout: timeout,
		scanBuf: make([]byte, 64<<10),
		text:    make([]byte, 0, 8<<10),
		ends:    make([]int32, 0, 512),
	}
}

// withKey makes every request of c carry the engine's API key ("" none).
func (c *client) withKey(key string) *client {
	if key != "" {
		c.http.Transport = secret.Bearer(c.tr, secret.Static(key))
	}
	return c
}

// forget drops pooled connections, called after a server stops so a
// restarted server on the same port is never sent a dead connection.
func (c *client) forget() { c.tr.CloseIdleConnections() }

// now is the client's clock; tests replace it with the fake engine's
// virtual clock so that rankings are decided by the cost model, not by the
// load on the test machine.
var now = time.Now

// maxEvent bounds one SSE line; the final llama-server event carries the
// generation settings and is a few KiB.
const maxEvent = 4 << 20

// event is the slow-path decoding of one SSE payload.
type event struct {
	Content         string          `json:"content"`
	Stop            bool            `json:"stop"`
	TokensPredicted int             `json:"tokens_predicted"`
	Timings         *timings        `json:"timings"`
	Error           json.RawMessage `json:"error"`
}

type timings struct {
	PromptN            int     `json:"prompt_n"`
	CacheN             int     `json:"cache_n"`
	PromptMS           float64 `json:"prompt_ms"`
	PredictedN         int     `json:"predicted_n"`
	PredictedMS        float64 `json:"predicted_ms"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
	DraftN             int     `json:"draft_n"`
	DraftNAccepted     int     `json:"draft_n_accepted"`
	DraftRounds        int     `json:"draft_rounds"`
}

var (
	dataPrefix  = []byte("data:")
	doneMarker  = []byte("[DONE]")
	stopFalse   = []byte(`"stop":false`)
	errorKey    = []byte(`"error"`)
	timingsKey  = []byte(`"timings"`)
	contentOpen = []byte(`"content":"`)
)

// complete sends one request and reads the stream to its final event.
// Every failure comes back in result.err; a cancelled parent context comes
// back as ctx.Err() itself so that the caller can tell it from a failed run.
func (c *client) complete(ctx context.Context, baseURL string, body []byte) (res result) {
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, strings.TrimRight(baseURL, "/")+"/completion", bytes.NewReader(body))
	if err != nil {
		res.err = fmt.Errorf("build request: %w", err)
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")

	c.text = c.text[:0]
	c.ends = c.ends[:0]
	start := now()
	res.start = start
	resp, err := c.http.Do(req)
	if err != nil {
		res.err = c.wrapErr(ctx, rctx, err)
		return res
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		res.err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, errorText(msg))
		return res
	}

	last, final, err := c.readStream(ctx, rctx, resp.Body, &res, start)
	if err == nil && !final {
		err = ctx.Err() // a cancelled parent is not a failed run
		if err == nil {
			err = errors.New("stream ended without a final event (stop: true)")
		}
	}
	if err != nil {
		res.err = err
		return res
	}
	// Let the connection go back to the pool; the server ends the stream
	// right after the final event.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	c.finish(&res, last.Sub(start))
	return res
}

// readStream reads SSE events until the final one (stop: true), timing
// each content piece from start. It returns when the last event arrived
// and whether the final one came; an error event, a malformed event or a
// failed read ends it with an error.
func (c *client) readStream(ctx, rctx context.Context, body io.Reader, res *result, start time.Time) (last time.Time, final bool, err error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(c.scanBuf, maxEvent)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, dataPrefix) {
			continue
		}
		payload := bytes.TrimSpace(line[len(dataPrefix):])
		if len(payload) == 0 || bytes.Equal(payload, doneMarker) {
			continue
		}
		last = now()
		if handled, nonEmpty := c.fastContent(payload); handled {
			if nonEmpty {
				c.piece(res, start, last)
			}
			continue
		}
		ev := &c.ev
		*ev = event{}
		if err := json.Unmarshal(payload, ev); err != nil {
			return last, false, fmt.Errorf("malformed event: %w", err)
		}
		if len(ev.Error) > 0 && !bytes.Equal(ev.Error, []byte("null")) {
			return last, false, fmt.Errorf("engine error event: %s", errorText(ev.Error))
		}
		if ev.Content != "" {
			c.text = append(c.text, ev.Content...)
			c.piece(res, start, last)
		}
		if ev.Stop {
			res.final(ev)
			return last, true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return last, false, c.wrapErr(ctx, rctx, err)
	}
	return last, false, nil
}

// final takes the token count and timings of the final event; the
// timings' predicted_n, when given, is the engine's own count.
func (res *result) final(ev *event) {
	res.tokens, res.tokensFrom = ev.TokensPredicted, "tokens_predicted"
	t := ev.Timings
	if t == nil {
		return
	}
	if t.PredictedN > 0 {
		res.tokens, res.tokensFrom = t.PredictedN, "predicted_n"
	}
	res.predictedMS, res.predictedPerS = t.PredictedMS, t.PredictedPerSecond
	res.draftN, res.draftAcc, res.draftRounds = t.DraftN, t.DraftNAccepted, t.DraftRounds
	res.promptN, res.cacheN, res.promptMS = t.PromptN, t.CacheN, t.PromptMS
}

// finish completes a result whose stream ended well: its wall time, a
// token count from the events when the engine reported none, and its
// text. No tokens at all is a failed run.
func (c *client) finish(res *result, wall time.Duration) {
	res.wall = wall
	if res.tokens == 0 { // an engine that reports no count: fall back to the events
		res.tokens, res.tokensFrom = res.pieces, "events"
	}
	if res.tokens == 0 {
		res.err = errors.New("the stream carried no tokens")
		return
	}
	res.text = string(c.text)
	res.pieceEnds = append([]int32(nil), c.ends...)
}

func (c *client) piece(res *result, start, now time.Time) {
	if res.pieces == 0 {
		res.ttft = now.Sub(start)
	}
	res.pieces++
	c.ends = append(c.ends, int32(len(c.text)))
}

// wrapErr tells a cancelled run (returned as the parent's error) from a
// per-request timeout and from a transport failure.
func (c *client) wrapErr(parent, rctx context.Context, err error) error {
	if perr := parent.Err(); perr != nil {
		return perr
	}
	if errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("request timed out after %s (stalled stream?)", c.timeout)
	}
	return fmt.Errorf("request: %w", err)
}

// fastContent appends the content of a plain token event to c.text without
// allocating. It declines (handled false, text untouched) anything that is
// not plainly a content event: final and error events, and any encoding it
// does not expect, which then take the encoding/json path. A quote inside a
// JSON string is always escaped, so `"stop":false` can only match as a key;
// `"error"` also matches a token whose whole text is the word, which the
// encoding/json path then reads as the token it is.
func (c *client) fastContent(p []byte) (handled, nonEmpty bool) {
	if !bytes.Contains(p, stopFalse) || bytes.Contains(p, errorKey) || bytes.Contains(p, timingsKey) {
		return false, false
	}
	i := bytes.Index(p, contentOpen)
	if i < 0 {
		return false, false
	}
	n0 := len(c.text)
	out, _, err := jsonstr.Append(c.text, p[i+len(contentOpen):])
	if err != nil {
		c.text = c.text[:n0]
		return false, false
	}
	c.text = out
	return true, len(out) > n0 // an empty piece is not a token
}

// errorText renders an engine error body or error object briefly: the
// message of {"error":{"message":...}} or {"message":...}, else the text.
func errorText(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	var obj struct {
		Message string `json:"message"`
		Error   *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		switch {
		case obj.Error != nil && obj.Error.Message != "":
			return obj.Error.Message
		case obj.Message != "":
			return obj.Message
		}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	const max = 300
	t := strings.ToValidUTF8(string(raw), "?")
	if len(t) > max {
		t = t[:max] + "…"
	}
	return t
}

// metrics is the part of llama.cpp's Prometheus page the bench reads.
type metrics struct {
	drafts      float64   // llamacpp:spec_decode_num_drafts_total
	hasDrafts   bool      // the counter exists
	acceptedPos []float64 // llamacpp:spec_decode_num_accepted_tokens_per_pos_total by position
}

const (
	metricDrafts = "llamacpp:spec_decode_num_drafts_total"
	metricPerPos = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
)

// errNoMetrics marks a server without a usable /metrics page (404, or not
// started with --metrics); the bench then stops asking it.
var errNoMetrics = errors.New("no /metrics")

// scrapeMetrics reads GET /metrics, bounded by a short timeout: a missing
// page is not a failure of the run, only of that source of counters.
func (c *client) scrapeMetrics(ctx context.Context, baseURL string) (metrics, error) {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, strings.TrimRight(baseURL, "/")+"/metrics", nil)
	if err != nil {
		return metrics{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return metrics{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return metrics{}, fmt.Errorf("%w: HTTP %d", errNoMetrics, resp.StatusCode)
	}
	return parseMetrics(io.LimitReader(resp.Body, 8<<20))
}

// parseMetrics reads the speculative counters from a Prometheus text page.
func parseMetrics(r io.Reader) (metrics, error) {
	var m metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		smp, ok, err := promtext.ParseLine(sc.Text())
		if err != nil {
			// A malformed line of a family the bench reads is an error; one
			// of any other family (OLD trees print `inf`, odd types) is not.
			line := strings.TrimSpace(sc.Text())
			if strings.HasPrefix(line, metricDrafts) || strings.HasPrefix(line, metricPerPos) {
				return m, fmt.Errorf("metrics: %w", err)
			}
			continue
		}
		if !ok {
			continue
		}
		switch smp.Name {
		case metricDrafts:
			m.drafts, m.hasDrafts = smp.Value, true
		case metricPerPos:
			i, err := strconv.Atoi(smp.Labels["position"])
			if err != nil || i < 0 || i > 4096 {
				continue
			}
			for len(m.acceptedPos) <= i {
				m.acceptedPos = append(m.acceptedPos, 0)
			}
			m.acceptedPos[i] = smp.Value
		}
	}
	return m, sc.Err()
}

// delta is after − before per counter; nil positions when the page has none.
func (after metrics) delta(before metrics) (drafts int, byPos []int, ok bool) {
	if !after.hasDrafts {
		return 0, nil, false
	}
	drafts = int(after.drafts - before.drafts + 0.5)
	if len(after.acceptedPos) > 0 {
		byPos = make([]int, len(after.acceptedPos))
		for i, v := range after.acceptedPos {
			b := 0.0
			if i < len(before.acceptedPos) {
				b = before.acceptedPos[i]
			}
			byPos[i] = int(v - b + 0.5)
		}
	}
	return drafts, byPos, true
}
