// Command followeval measures a running `speclaunch serve` that follows a
// width schedule (docs/serving.md, "Following a schedule") under traffic
// whose load changes: phases of N closed-loop clients in turn (default one
// and four, 2 minutes each, 12 minutes in all), each client sending its
// next request the moment the last one ends, prompts in rotation. Per
// phase it reports the clients' tokens/s, failed and empty requests, the
// widths the status page showed and the switches made; run it once
// against a server at a fixed width (serve --draft-block-size W) to have
// that width's figure for the same traffic. Against a server with an API
// key it sends the first key it finds where serve reads keys from
// (LLAMA_API_KEY, LLAMA_ARG_API_KEY_FILE; else VLLM_API_KEY; docs/engines.md).
//
//	go run ./scripts/followeval -url http://127.0.0.1:8080 -prompts internal/bench/prompts/code \
//	    -levels 1,4 -phase 2m -run 12m -max-tokens 200 -out follow.json
//
// Requests are greedy unless -temperature says otherwise, as tune
// measures (llama-server's own default is 0.8). Their max_tokens vary by
// prompt around -max-tokens (-length-spread, 0.5 by default): at one
// length, clients that start a phase together stay in step at classic
// decoding, its best case and no server's traffic
// (docs/benchmark_results/h100-switch-2026-12-06e.md); runs before
// 2026-12-06e used one length.
//
// Exit status: 0 no failed or empty request, 1 some, 2 bad input.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/adapteval"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/loadgen"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/secret"
)

// Phase is one stretch of constant load.
type Phase struct {
	Clients  int     `json:"clients"`
	Seconds  float64 `json:"seconds"`
	Tokens   int     `json:"tokens"`
	Rate     float64 `json:"tokens_per_s"`
	Sent     int     `json:"sent"`
	Bad      int     `json:"failed_or_empty"`
	Widths   []int   `json:"widths_seen"`
	Switches int     `json:"switches"`
	// Errors counts each failure's first words ("stream without its final
	// event", "status 503: ..."), so a failed request says what it was.
	Errors map[string]int `json:"errors,omitempty"`
}

// Report is the run.
type Report struct {
	URL    string `json:"url"`
	Levels []int  `json:"levels"`
	Phase  string `json:"phase"`
	// Temperature is sent with every request: llama-server's own default
	// is 0.8, and tune measures greedy (0).
	Temperature float64 `json:"temperature"`
	// MaxTokens and LengthSpread are the requests' lengths (loadgen.Lengths).
	MaxTokens    int             `json:"max_tokens"`
	LengthSpread float64         `json:"length_spread"`
	Phases       []Phase         `json:"phases"`
	Tokens       int             `json:"tokens"`
	Seconds      float64         `json:"seconds"`
	Rate         float64         `json:"tokens_per_s"`
	Bad          int             `json:"failed_or_empty"`
	Switches     json.RawMessage `json:"switches"` // the status page's switch records at the end
}

func main() { os.Exit(run(os.Args[1:])) }

// flagProblems is each rule the flags break, said as its fix: the one
// line for them all listed every rule, not the one broken.
func flagProblems(dir string, levelsErr error, phase, total time.Duration, maxTokens int, spread, temp float64, nargs int) []string {
	var bad []string
	for _, c := range []struct {
		bad bool
		fix string
	}{
		{dir == "", "give -prompts DIR (e.g. internal/bench/prompts/code)"},
		{levelsErr != nil, fmt.Sprintf("give -levels like 1,4 (%v)", levelsErr)},
		{phase <= 0, "give -phase > 0"},
		{total < phase, "give -run ≥ -phase"},
		{maxTokens < 1, "give -max-tokens ≥ 1"},
		{!(spread >= 0 && spread < 1), "give -length-spread from 0 to below 1"},
		{!(temp >= 0 && temp <= 5), "give -temperature from 0 to 5"},
		{nargs > 0, "give no positional arguments"},
	} {
		if c.bad {
			bad = append(bad, c.fix)
		}
	}
	return bad
}

// errUnauthorized: the server wants an API key followeval did not send.
var errUnauthorized = errors.New("no key or a wrong one")

func run(args []string) int {
	fs := flag.NewFlagSet("followeval", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8080", "public URL of speclaunch serve (the proxy)")
	dir := fs.String("prompts", "", "directory of prompt files, one prompt per file (required; e.g. internal/bench/prompts/code)")
	levels := fs.String("levels", "1,4", "clients of each phase, in turn")
	phase := fs.Duration("phase", 2*time.Minute, "length of one phase")
	total := fs.Duration("run", 12*time.Minute, "length of the run")
	maxTokens := fs.Int("max-tokens", 200, "max_tokens per request: the mean, with -length-spread")
	spread := fs.Float64("length-spread", 0.5, "vary max_tokens by prompt from (1-s)x to (1+s)x -max-tokens, so clients never run in step (0: one length)")
	temp := fs.Float64("temperature", 0, "temperature sent with every request (0 = greedy, as tune measures; llama-server's own default is 0.8)")
	out := fs.String("out", "", "write the JSON report here")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "followeval drives a running speclaunch serve with closed-loop clients whose count changes by phase (-levels, -phase), and reports tokens/s, widths and switches per phase.\n\nUsage: followeval -prompts DIR [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ls, err := parseLevels(*levels)
	if bad := flagProblems(*dir, err, *phase, *total, *maxTokens, *spread, *temp, fs.NArg()); len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "followeval: %s (-h lists the flags)\n", strings.Join(bad, "; "))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ps, err := adapteval.ReadPrompts(ctx, *dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "followeval:", err)
		return 2
	}
	auth, err := authHeader(os.Environ(), safefile.KeyFileReader(context.Background()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "followeval:", err)
		return 2
	}
	if _, err := status(*url, auth); err != nil { // nothing to measure: say so now, not after the run
		hint := "start speclaunch serve first, or give -url its public address"
		if errors.Is(err, errUnauthorized) {
			hint = "the server has an API key: set LLAMA_API_KEY (or LLAMA_ARG_API_KEY_FILE) as for serve"
		}
		fmt.Fprintf(os.Stderr, "followeval: %v; %s\n", err, hint)
		return 2
	}
	texts := make([]string, len(ps))
	for i, p := range ps {
		texts[i] = p.Text
	}
	rep := Report{URL: *url, Levels: ls, Phase: phase.String(), Temperature: *temp, MaxTokens: *maxTokens, LengthSpread: *spread}
	for i := 0; time.Duration(i)*(*phase) < *total && ctx.Err() == nil; i++ {
		n := ls[i%len(ls)]
		p := runPhase(ctx, traffic{url: *url, auth: auth, maxTokens: *maxTokens, spread: *spread, temp: *temp, prompts: texts}, n, *phase)
		fmt.Fprintf(os.Stderr, "phase %d: %d clients, %.1f tok/s, %d requests, %d bad, widths %v, %d switches\n", i+1, n, p.Rate, p.Sent, p.Bad, p.Widths, p.Switches)
		rep.Phases = append(rep.Phases, p)
		rep.Tokens, rep.Seconds, rep.Bad = rep.Tokens+p.Tokens, rep.Seconds+p.Seconds, rep.Bad+p.Bad
	}
	if rep.Seconds > 0 {
		rep.Rate = float64(rep.Tokens) / rep.Seconds
	}
	if st, err := status(*url, auth); err == nil {
		rep.Switches = st.Switches
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, "followeval: the report:", err)
		return 2
	}
	if *out != "" {
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "followeval:", err)
			return 2
		}
	} else {
		fmt.Println(string(b))
	}
	fmt.Fprintf(os.Stderr, "run: %.1f tok/s over %.0f s, %d failed or empty\n", rep.Rate, rep.Seconds, rep.Bad)
	if rep.Bad > 0 {
		return 1
	}
	return 0
}

func parseLevels(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 256 {
			return nil, fmt.Errorf("level %q: want clients from 1 to 256", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// traffic is what every phase's clients send: the flags' requests.
type traffic struct {
	url       string
	auth      http.Header
	maxTokens int
	spread    float64 // -length-spread: max_tokens varies by prompt (loadgen.Lengths)
	temp      float64
	prompts   []string
}

// options is loadgen's run of n clients for d. The spread is passed on:
// until 2026-12-07 it was not, and every request of the H100 follow runs
// of 2026-12-06g to 2026-12-07b asked for -max-tokens exactly (a review,
// from their engine timings).
func (t traffic) options(n int, d time.Duration) loadgen.Options {
	return loadgen.Options{URL: t.url, Clients: n, Duration: d, Stream: true, MaxTokens: t.maxTokens, Spread: t.spread, Prompts: t.prompts,
		Params: map[string]any{"temperature": t.temp}, Timeout: 5 * time.Minute, Header: t.auth}
}

// runPhase runs n clients for d while polling the status page once a
// second for the width serving and the switches made.
func runPhase(ctx context.Context, tr traffic, n int, d time.Duration) Phase {
	url, auth := tr.url, tr.auth
	p := Phase{Clients: n}
	var mu sync.Mutex
	seen := map[int]bool{}
	first, last := -1, -1
	pollCtx, stopPoll := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if st, err := status(url, auth); err == nil {
				mu.Lock()
				if st.Engine != nil && !seen[st.Engine.Width] {
					seen[st.Engine.Width] = true
					p.Widths = append(p.Widths, st.Engine.Width)
				}
				if first < 0 {
					first = st.Total
				}
				last = st.Total
				mu.Unlock()
			}
			select {
			case <-pollCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	res, err := loadgen.Run(ctx, tr.options(n, d))
	stopPoll()
	<-done
	if err != nil {
		fmt.Fprintln(os.Stderr, "followeval:", err)
	}
	p.Seconds, p.Tokens, p.Sent, p.Bad, p.Errors = res.Elapsed.Seconds(), res.Tokens, res.Sent, res.Bad(), res.Errors
	if p.Seconds > 0 {
		p.Rate = float64(p.Tokens) / p.Seconds
	}
	if st, err := status(url, auth); err == nil {
		last = st.Total
	}
	if first >= 0 {
		p.Switches = last - first
	}
	return p
}

type statusPage struct {
	Engine *struct {
		Width int `json:"width"`
	} `json:"engine"`
	Total    int             `json:"switches_total"`
	Switches json.RawMessage `json:"switches"`
}

func status(url string, auth http.Header) (statusPage, error) {
	var st statusPage
	c := http.Client{Timeout: 5 * time.Second}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(url, "/")+"/speclaunch/status", nil)
	if err != nil {
		return st, err
	}
	maps.Copy(req.Header, auth)
	resp, err := c.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return st, fmt.Errorf("status page: %s: %w", resp.Status, errUnauthorized)
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status page: %s", resp.Status)
	}
	return st, json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 4<<20)).Decode(&st)
}

// authHeader carries the key serve was given, read where serve and
// llama-server read keys (secret.Keys with llama.cpp's spec: LLAMA_API_KEY's
// list, LLAMA_ARG_API_KEY_FILE's file), else vLLM's (VLLM_API_KEY): the
// first one. env is the NAME=VALUE environment; read reads a key file.
func authHeader(env []string, read func(string) ([]byte, error)) (http.Header, error) {
	auth := http.Header{}
	for _, e := range []key.Engine{key.LlamaCpp, key.VLLM} {
		ks, err := secret.Keys(engine.APIKeySpec(e), nil, env, read)
		if err != nil {
			return nil, err
		}
		if len(ks) > 0 {
			auth.Set("Authorization", "Bearer "+ks[0])
			break
		}
	}
	return auth, nil
}
