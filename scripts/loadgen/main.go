// Command loadgen sends a bounded streaming load to an OpenAI-compatible
// server and reports failed and empty answers: the load serve's switch tests
// use, for rerunning by hand against a running speclaunch (docs/serving.md).
//
//	go run ./scripts/loadgen -url http://127.0.0.1:8080 -clients 4 -duration 40s
//
// It exits 1 when any request failed or came back empty.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/speclaunch/speclaunch/internal/loadgen"
)

func main() {
	var o loadgen.Options
	flag.StringVar(&o.URL, "url", "http://127.0.0.1:8080", "server base URL")
	flag.StringVar(&o.Path, "path", "/v1/completions", "request path")
	flag.IntVar(&o.Clients, "clients", 4, "concurrent clients")
	flag.IntVar(&o.Requests, "requests", 0, "requests per client (0 = until -duration ends)")
	flag.DurationVar(&o.Duration, "duration", 30*time.Second, "how long to send")
	flag.BoolVar(&o.Stream, "stream", true, "stream responses (SSE)")
	flag.IntVar(&o.MaxTokens, "max-tokens", 16, "max_tokens per request")
	flag.StringVar(&o.Prompt, "prompt", "def fib(n):", "prompt")
	jsonOut := flag.Bool("json", false, "print the result as JSON")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := loadgen.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	if *jsonOut {
		json.NewEncoder(os.Stdout).Encode(res)
	} else {
		fmt.Println(res)
	}
	if res.Bad() > 0 {
		os.Exit(1)
	}
}
