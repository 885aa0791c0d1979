// Package loadgen is a small closed-loop load client for an
// OpenAI-compatible server: N clients, each sending completions one after
// another for a fixed count or time. It classifies every answer so that a
// switch test can assert "0 failed, 0 empty": a streamed 200 counts only
// when it carried at least one token and ended with [DONE].
//
// The tests of serve's engine switches use it, and scripts/loadgen wraps it
// so anyone can rerun the same load against a running server.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options describe the load.
type Options struct {
	URL       string        // base URL, e.g. http://127.0.0.1:8080
	Path      string        // default /v1/completions; a /chat/ path sends the prompt as one user message
	Clients   int           // concurrent clients (default 4)
	Requests  int           // requests per client; 0 = until Duration ends
	Duration  time.Duration // stop starting requests after this; 0 = no limit (Requests must be set)
	Stream    bool          // stream: true (SSE)
	MaxTokens int           // default 16
	// Spread varies max_tokens by prompt, from MaxTokens·(1−Spread) to
	// MaxTokens·(1+Spread) (Lengths), so that requests end at different
	// steps: with one length, greedy classic decoding ends every request
	// of clients that began together together, and they stay in step,
	// which no server's traffic does (docs/benchmark_results/h100-switch-2026-12-06e.md).
	Spread  float64
	Prompt  string          // default "def fib(n):"
	Prompts []string        // when set, requests rotate through these instead of Prompt
	Seeds   []int           // when set, Prompts[i] is sent with "seed": Seeds[i]
	Params  map[string]any  // extra request fields (temperature, seed), merged into every body
	Stop    <-chan struct{} // closed: start no new request; those in flight finish
	// Stagger delays client k's first request by k·Stagger, so that the
	// clients run out of step from the start rather than in step.
	Stagger time.Duration
	// Header is added to every request (e.g. an engine's API key).
	Header  http.Header
	Live    *Live         // optional counters updated as chunks arrive
	OnDone  func(Sample)  // optional: called for every request counted in Result
	Model   string        // default "speclaunch"
	Timeout time.Duration // per request (default 60s)
	Client  *http.Client
}

// Result counts the outcomes.
type Result struct {
	Sent   int `json:"sent"`
	OK     int `json:"ok"`
	Failed int `json:"failed"` // transport error or a status other than 200
	Empty  int `json:"empty"`  // 200 without a token
	// Cut counts streams that ended without their final event: a
	// finish_reason and then [DONE] on the OpenAI routes, "stop":true on
	// llama-server's /completion. A cut stream can look complete to a
	// client that does not check.
	Cut      int            `json:"cut"`
	Aborted  int            `json:"aborted"` // cut short by the caller's own cancellation: not counted as sent
	Tokens   int            `json:"tokens"`  // streamed chunks with text, or completion tokens reported
	ByStatus map[int]int    `json:"by_status"`
	Errors   map[string]int `json:"errors,omitempty"` // first words of each failure, counted
	Elapsed  time.Duration  `json:"elapsed_ns"`
}

// Live counts while the load runs, for a caller that measures a window of
// it: Tokens grows with every streamed chunk that carries text (or by a
// whole answer's tokens when not streaming), Done with every request
// counted in Result.
type Live struct {
	Tokens atomic.Int64
	Done   atomic.Int64
}

// Sample is one finished request, for OnDone.
type Sample struct {
	End    time.Time
	Prompt int  // index into Prompts (0 with a single Prompt)
	Tokens int  // as in Result.Tokens
	OK     bool // neither failed nor empty
	// EngineN and EnginePerSecond are the engine's own timings block
	// (predicted_n, predicted_per_second) when the answer carried one
	// (llama-server and the sim do); 0 otherwise.
	EngineN         int
	EnginePerSecond float64
}

// Bad is Failed + Empty + Cut.
func (r Result) Bad() int { return r.Failed + r.Empty + r.Cut }

func (r Result) String() string {
	var errs []string
	for e, n := range r.Errors {
		errs = append(errs, fmt.Sprintf("%dx %s", n, e))
	}
	sort.Strings(errs)
	return fmt.Sprintf("sent %d, ok %d, failed %d, empty %d, cut %d, %d tokens in %s; statuses %v; %s",
		r.Sent, r.OK, r.Failed, r.Empty, r.Cut, r.Tokens, r.Elapsed.Round(time.Millisecond), r.ByStatus, strings.Join(errs, "; "))
}

func (o *Options) defaults() {
	if o.Path == "" {
		o.Path = "/v1/completions"
	}
	if o.Clients <= 0 {
		o.Clients = 4
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 16
	}
	if o.Prompt == "" {
		o.Prompt = "def fib(n):"
	}
	if o.Model == "" {
		o.Model = "speclaunch"
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Client == nil {
		// A connection per request, as the proxy does towards engines:
		// llama-server d32676d closes a streamed connection shortly after
		// its answer while advertising keep-alive, and a reused one lost
		// the next request (125 of 394 in a direct run).
		o.Client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	}
}

// Run sends the load and waits for every request it started.
func Run(ctx context.Context, o Options) (Result, error) {
	o.defaults()
	if o.Requests <= 0 && o.Duration <= 0 {
		return Result{}, fmt.Errorf("loadgen: give a request count or a duration")
	}
	bodies, err := requestBodies(o)
	if err != nil {
		return Result{}, err
	}
	r := &run{o: o, bodies: bodies, res: Result{ByStatus: map[int]int{}, Errors: map[string]int{}}}
	start := time.Now()
	if o.Duration > 0 {
		r.deadline = start.Add(o.Duration)
	}
	var wg sync.WaitGroup
	for c := 0; c < o.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d := time.Duration(c) * o.Stagger; d > 0 {
				t := time.NewTimer(d)
				defer t.Stop()
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
			r.client(ctx)
		}()
	}
	wg.Wait()
	r.res.Elapsed = time.Since(start)
	return r.res, nil
}

// Lengths are the max_tokens of n prompts with mean about max and the
// given spread: evenly from max·(1−spread) to max·(1+spread), each step
// once, in an order that does not follow the prompts' (a stride near n/2),
// each at least 1. A spread of 0 (or below) gives max for each.
func Lengths(max int, spread float64, n int) []int {
	out := make([]int, n)
	m := n/2 + 1 // a stride coprime with n visits every step once
	for gcd(m, n) != 1 {
		m++
	}
	for i := range out {
		out[i] = max
		if spread > 0 && n > 1 {
			step := (i * m) % n
			f := 1 - spread + 2*spread*float64(step)/float64(n-1)
			out[i] = int(math.Max(1, math.Round(float64(max)*f)))
		}
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// requestBodies are the JSON bodies, one per prompt: a completion, or a
// chat completion with the prompt as one user message.
func requestBodies(o Options) ([][]byte, error) {
	prompts := o.Prompts
	if len(prompts) == 0 {
		prompts = []string{o.Prompt}
	}
	bodies := make([][]byte, len(prompts))
	lengths := Lengths(o.MaxTokens, o.Spread, len(prompts))
	for i, p := range prompts {
		m := map[string]any{}
		for k, v := range o.Params {
			m[k] = v
		}
		m["model"], m["prompt"], m["max_tokens"], m["stream"] = o.Model, p, lengths[i], o.Stream
		if strings.Contains(o.Path, "/chat/") {
			delete(m, "prompt")
			m["messages"] = []map[string]string{{"role": "user", "content": p}}
		}
		if i < len(o.Seeds) {
			m["seed"] = o.Seeds[i]
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("loadgen: request body: %w", err)
		}
		bodies[i] = b
	}
	return bodies, nil
}

// run is one load: its clients share the prompt rotation and the result.
type run struct {
	o        Options
	bodies   [][]byte
	deadline time.Time
	next     atomic.Int64 // rotates prompts across all clients
	// after is a client's pause timer (time.After when nil; a test's
	// fake).
	after func(time.Duration) <-chan time.Time

	mu  sync.Mutex
	res Result
}

func (r *run) wait(d time.Duration) <-chan time.Time {
	if r.after != nil {
		return r.after(d)
	}
	return time.After(d)
}

// client sends requests one after another until the load ends.
func (r *run) client(ctx context.Context) {
	o := r.o
	for i := 0; o.Requests <= 0 || i < o.Requests; i++ {
		if ctx.Err() != nil || (!r.deadline.IsZero() && time.Now().After(r.deadline)) || stopped(o.Stop) {
			return
		}
		pi := int((r.next.Add(1) - 1) % int64(len(r.bodies)))
		out := one(ctx, o, r.bodies[pi])
		if !r.count(ctx, pi, out) {
			return
		}
		if d := pause(out); d > 0 {
			if !r.deadline.IsZero() {
				d = min(d, time.Until(r.deadline)) // the pause ends with the load
			}
			select {
			case <-ctx.Done():
			case <-o.Stop: // a nil Stop never ends it
			case <-r.wait(d):
			}
		}
	}
}

// count adds one request's outcome; false when the caller's own
// cancellation cut it (not counted as sent).
func (r *run) count(ctx context.Context, pi int, out outcome) bool {
	o := r.o
	r.mu.Lock()
	defer r.mu.Unlock()
	res := &r.res
	if ctx.Err() != nil && out.err != "" {
		res.Aborted++
		return false
	}
	res.Sent++
	res.ByStatus[out.status]++
	res.Tokens += out.tokens
	switch {
	case out.err != "":
		res.Failed++
		res.Errors[out.err]++
	case out.tokens == 0:
		res.Empty++
		res.Errors["empty 200"]++
	case o.Stream && !out.done:
		res.Cut++
		res.Errors["stream without its final event"]++
	default:
		res.OK++
	}
	if !o.Stream && o.Live != nil {
		o.Live.Tokens.Add(int64(out.tokens))
	}
	if o.Live != nil {
		o.Live.Done.Add(1)
	}
	if o.OnDone != nil {
		o.OnDone(Sample{End: time.Now(), Prompt: pi, Tokens: out.tokens, OK: out.err == "" && out.tokens > 0 && (!o.Stream || out.done),
			EngineN: out.engineN, EnginePerSecond: out.enginePS})
	}
	return true
}

func stopped(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false // a nil channel never stops
	}
}

type outcome struct {
	status int
	// retryAfter is the Retry-After of a refused request, given in
	// seconds (0: none, or a date, which a client of a local server need
	// not read).
	retryAfter time.Duration
	tokens     int
	done       bool
	err        string
	engineN    int
	enginePS   float64
}

// timings is the part of llama-server's per-request timings block the
// load reports.
type timings struct {
	Timings *struct {
		PredictedN         int     `json:"predicted_n"`
		PredictedPerSecond float64 `json:"predicted_per_second"`
	} `json:"timings"`
}

func (out *outcome) timings(data []byte) {
	var v timings
	if json.Unmarshal(data, &v) == nil && v.Timings != nil {
		out.engineN, out.enginePS = v.Timings.PredictedN, v.Timings.PredictedPerSecond
	}
}

// answer is what a non-streamed answer carries: the OpenAI routes'
// choices[].text (completions) or choices[].message.content (chat) with
// usage, or llama-server's native /completion's content and
// tokens_predicted ({"content":"…","stop":true,…}).
type answer struct {
	Choices []struct {
		Text    string `json:"text"`
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Content         string `json:"content"`
	TokensPredicted int    `json:"tokens_predicted"`
}

// answerTokens is how many tokens a non-streamed answer counts: 0 when it
// carries no text (empty), at least 1 when it does but says no count.
// Reading the OpenAI shapes alone counted every answer of /completion
// empty.
func answerTokens(raw []byte) (int, error) {
	var v answer
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, err
	}
	switch {
	case len(v.Choices) > 0 && (v.Choices[0].Text != "" || v.Choices[0].Message.Content != ""):
		return max(1, v.Usage.CompletionTokens), nil
	case v.Content != "":
		return max(1, v.TokensPredicted), nil
	}
	return 0, nil
}

// failBackoff is the pause after a request that got no HTTP answer.
const failBackoff = 50 * time.Millisecond

// maxRetryAfter bounds the wait a server's Retry-After asks of a client.
const maxRetryAfter = 5 * time.Second

// pause is how long a client waits before its next request: a request
// that did not reach the engine, failBackoff (against a port no longer
// served, an engine retired by a switch, it would otherwise send hundreds
// of thousands a second); one refused with 503 or 429, the Retry-After it
// carries, at most maxRetryAfter, else failBackoff (a client of a stopping
// speclaunch sent 58,814 in 11 s, each answered 503 with Retry-After: 1;
// an operator campaign). Otherwise none.
func pause(out outcome) time.Duration {
	switch {
	case out.status == 0 && out.err != "":
		return failBackoff
	case out.status == http.StatusServiceUnavailable || out.status == http.StatusTooManyRequests:
		if out.retryAfter > 0 {
			return min(out.retryAfter, maxRetryAfter)
		}
		return failBackoff
	}
	return 0
}

func one(ctx context.Context, o Options, body []byte) outcome {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(o.URL, "/")+o.Path, bytes.NewReader(body))
	if err != nil {
		return outcome{err: err.Error()}
	}
	setHeader(req, o.Header)
	resp, err := o.Client.Do(req)
	if err != nil {
		return outcome{err: short(err.Error())}
	}
	defer resp.Body.Close()
	out := outcome{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && n > 0 {
			out.retryAfter = time.Duration(min(n, 3600)) * time.Second
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		out.err = fmt.Sprintf("status %d: %s", resp.StatusCode, short(string(b)))
		return out
	}
	if !o.Stream {
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		if err == nil {
			out.tokens, err = answerTokens(raw)
		}
		if err != nil {
			out.err = "bad body: " + short(err.Error())
			return out
		}
		out.timings(raw)
		return out
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var finish, sawDone, stop bool
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			sawDone = true
			continue
		}
		finish = finish || strings.Contains(data, `"finish_reason":"`)
		stop = stop || strings.Contains(data, `"stop":true`)
		if strings.Contains(data, `"error"`) && errorEvent(data) {
			out.err = "error event: " + short(data)
			return out
		}
		if strings.Contains(data, `"text":"`) && !strings.Contains(data, `"text":""`) || strings.Contains(data, `"content":"`) && !strings.Contains(data, `"content":""`) {
			out.tokens++
			if o.Live != nil {
				o.Live.Tokens.Add(1)
			}
		}
		if strings.Contains(data, `"timings"`) {
			out.timings([]byte(data))
		}
	}
	if err := sc.Err(); err != nil {
		out.err = "stream cut: " + short(err.Error())
	}
	out.done = streamWhole(o.Path, finish, sawDone, stop)
	return out
}

// errorEvent reports an event whose top-level object has an error, an
// object or a message: a token whose text is the word error also puts
// "error" in the line.
func errorEvent(data string) bool {
	var v struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal([]byte(data), &v) != nil {
		return false
	}
	e := bytes.TrimSpace(v.Error)
	return len(e) > 2 && (e[0] == '{' || e[0] == '"')
}

// setHeader sets the load's own header on a request, then the JSON
// content type.
func setHeader(req *http.Request, h http.Header) {
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
}

// streamWhole: the stream carried its final event.
func streamWhole(path string, finish, done, stop bool) bool {
	if strings.HasPrefix(path, "/v1/") {
		return finish && done
	}
	return stop
}

// short keeps error keys readable and bounded (ports and pids vary).
func short(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}
