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
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Options describe the load.
type Options struct {
	URL       string        // base URL, e.g. http://127.0.0.1:8080
	Path      string        // default /v1/completions
	Clients   int           // concurrent clients (default 4)
	Requests  int           // requests per client; 0 = until Duration ends
	Duration  time.Duration // stop starting requests after this; 0 = no limit (Requests must be set)
	Stream    bool          // stream: true (SSE)
	MaxTokens int           // default 16
	Prompt    string        // default "def fib(n):"
	Model     string        // default "speclaunch"
	Timeout   time.Duration // per request (default 60s)
	Client    *http.Client
}

// Result counts the outcomes.
type Result struct {
	Sent     int            `json:"sent"`
	OK       int            `json:"ok"`
	Failed   int            `json:"failed"`  // transport error or a status other than 200
	Empty    int            `json:"empty"`   // 200 without a token (or without [DONE] when streaming)
	Aborted  int            `json:"aborted"` // cut short by the caller's own cancellation: not counted as sent
	Tokens   int            `json:"tokens"`  // streamed chunks with text, or completion tokens reported
	ByStatus map[int]int    `json:"by_status"`
	Errors   map[string]int `json:"errors,omitempty"` // first words of each failure, counted
	Elapsed  time.Duration  `json:"elapsed_ns"`
}

// Bad is Failed + Empty.
func (r Result) Bad() int { return r.Failed + r.Empty }

func (r Result) String() string {
	var errs []string
	for e, n := range r.Errors {
		errs = append(errs, fmt.Sprintf("%dx %s", n, e))
	}
	sort.Strings(errs)
	return fmt.Sprintf("sent %d, ok %d, failed %d, empty %d, %d tokens in %s; statuses %v; %s",
		r.Sent, r.OK, r.Failed, r.Empty, r.Tokens, r.Elapsed.Round(time.Millisecond), r.ByStatus, strings.Join(errs, "; "))
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
		o.Client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	}
}

// Run sends the load and waits for every request it started.
func Run(ctx context.Context, o Options) (Result, error) {
	o.defaults()
	if o.Requests <= 0 && o.Duration <= 0 {
		return Result{}, fmt.Errorf("loadgen: give a request count or a duration")
	}
	body, err := json.Marshal(map[string]any{"model": o.Model, "prompt": o.Prompt, "max_tokens": o.MaxTokens, "stream": o.Stream})
	if err != nil {
		return Result{}, err
	}
	res := Result{ByStatus: map[int]int{}, Errors: map[string]int{}}
	var mu sync.Mutex
	start := time.Now()
	deadline := time.Time{}
	if o.Duration > 0 {
		deadline = start.Add(o.Duration)
	}
	var wg sync.WaitGroup
	for c := 0; c < o.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; o.Requests <= 0 || i < o.Requests; i++ {
				if ctx.Err() != nil || (!deadline.IsZero() && time.Now().After(deadline)) {
					return
				}
				out := one(ctx, o, body)
				mu.Lock()
				if ctx.Err() != nil && out.err != "" {
					res.Aborted++
					mu.Unlock()
					return
				}
				res.Sent++
				res.ByStatus[out.status]++
				res.Tokens += out.tokens
				switch {
				case out.err != "":
					res.Failed++
					res.Errors[out.err]++
				case out.tokens == 0 || (o.Stream && !out.done):
					res.Empty++
					res.Errors["empty 200"]++
				default:
					res.OK++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res, nil
}

type outcome struct {
	status int
	tokens int
	done   bool
	err    string
}

func one(ctx context.Context, o Options, body []byte) outcome {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(o.URL, "/")+o.Path, bytes.NewReader(body))
	if err != nil {
		return outcome{err: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := o.Client.Do(req)
	if err != nil {
		return outcome{err: short(err.Error())}
	}
	defer resp.Body.Close()
	out := outcome{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		out.err = fmt.Sprintf("status %d: %s", resp.StatusCode, short(string(b)))
		return out
	}
	if !o.Stream {
		var v struct {
			Choices []struct {
				Text    string `json:"text"`
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&v); err != nil {
			out.err = "bad body: " + short(err.Error())
			return out
		}
		if len(v.Choices) > 0 && (v.Choices[0].Text != "" || v.Choices[0].Message.Content != "") {
			out.tokens = max(1, v.Usage.CompletionTokens)
		}
		return out
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			out.done = true
			continue
		}
		if strings.Contains(data, `"error"`) {
			out.err = "error event: " + short(data)
			return out
		}
		if strings.Contains(data, `"text":"`) && !strings.Contains(data, `"text":""`) || strings.Contains(data, `"content":"`) && !strings.Contains(data, `"content":""`) {
			out.tokens++
		}
	}
	if err := sc.Err(); err != nil {
		out.err = "stream cut: " + short(err.Error())
	}
	return out
}

// short keeps error keys readable and bounded (ports and pids vary).
func short(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}
