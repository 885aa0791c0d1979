// Command adapteval measures a running `speclaunch serve --adapt` through
// its proxy: the width the adaptive loop chose, the seconds and requests
// until each switch, and the aggregate tokens/s after it settled
// (internal/adapteval; docs/bench.md, "Measuring `serve --adapt`").
//
//	go run ./scripts/adapteval -url http://127.0.0.1:8080 -prompts internal/bench/prompts/code \
//	    -clients 4 -max-tokens 200 -measure 60s -out adapt-eval.json
//
// Exit status: 0 settled with no failed or empty request, 1 a measurement
// that did not pass (not settled, or failed/empty requests), 2 bad input or
// no measurement possible.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/speclaunch/speclaunch/internal/adapteval"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("adapteval", flag.ContinueOnError)
	var o adapteval.Options
	fs.StringVar(&o.URL, "url", "http://127.0.0.1:8080", "public URL of `speclaunch serve --adapt` (the proxy)")
	dir := fs.String("prompts", "", "directory of prompt files, one prompt per file (e.g. internal/bench/prompts/code)")
	fs.IntVar(&o.Clients, "clients", 1, "concurrent clients")
	fs.IntVar(&o.MaxTokens, "max-tokens", 128, "max_tokens per request: the mean, with -length-spread")
	fs.Float64Var(&o.LengthSpread, "length-spread", 0.5, "vary max_tokens by prompt from (1-s)x to (1+s)x -max-tokens, so clients never run in step (0: one length)")
	fs.Float64Var(&o.Temperature, "temperature", 0, "sampling temperature (0 = greedy)")
	fs.IntVar(&o.Seed, "seed", 1234, "with -temperature > 0: seed of prompt i is seed+i")
	fs.DurationVar(&o.SettleTimeout, "settle-timeout", 5*time.Minute, "phase 1 bound: wait this long for the loop to settle")
	fs.DurationVar(&o.Measure, "measure", 0, "phase 2 length (default 60s unless -requests)")
	fs.IntVar(&o.Requests, "requests", 0, "phase 2: measure over this many completed requests instead")
	fs.BoolVar(&o.Direct, "direct", false, "phase 3: the same load straight at the engine, for the proxy's cost")
	fs.DurationVar(&o.Fixed, "fixed", 0, "measure a server at a fixed width (serve without --adapt): warm up this long, then phase 2; one run per width is the oracle of this traffic")
	out := fs.String("out", "", "write the JSON result here")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "adapteval: give -prompts DIR (one prompt per file), and no positional arguments")
		return 2
	}
	if o.Measure > 0 && o.Requests > 0 {
		fmt.Fprintln(os.Stderr, "adapteval: give -measure or -requests, not both")
		return 2
	}
	if o.Clients < 1 || o.MaxTokens < 1 || !(o.LengthSpread >= 0 && o.LengthSpread < 1) || o.Temperature < 0 || o.Requests < 0 || o.Measure < 0 || o.SettleTimeout <= 0 || o.Fixed < 0 {
		fmt.Fprintln(os.Stderr, "adapteval: -clients and -max-tokens must be ≥ 1, -length-spread from 0 to below 1, -temperature, -requests, -measure and -fixed ≥ 0, -settle-timeout > 0")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	if o.Prompts, err = adapteval.ReadPrompts(ctx, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "adapteval:", err)
		return 2
	}
	if !*quiet {
		o.Progress = os.Stderr
	}
	res, runErr := adapteval.Run(ctx, o)
	res.PromptDir = *dir
	if runErr == nil {
		fmt.Println(res.Summary())
	}
	// A run cut short after the load began still leaves its partial
	// result (switches seen, requests failed) for the post-mortem.
	if *out != "" && !res.Started.IsZero() {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "adapteval:", err)
			return 2
		}
	}
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "adapteval:", runErr)
		return 2
	}
	if !res.OK() {
		return 1
	}
	return 0
}
