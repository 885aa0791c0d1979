// Package fakellama is a fake llama-server built from real captured bytes
// (testdata/, copied from the project's golden captures of two llama.cpp
// trees). Tests re-execute their own binary as it (see Main) to exercise the
// launcher's llama.cpp adapter, DetectLlama, VerifyLlama, supervision and
// bench without a real engine.
//
// FAKELLAMA_TREE=new (default) behaves like the 2026 tree (d32676d):
// --spec-type/--spec-draft-n-max; -md alone loads a drafter and drafts
// nothing; --draft-max and LLAMA_ARG_DRAFT_MAX are removed stubs that stop
// the server. FAKELLAMA_TREE=old behaves like the older tree (b1a190e):
// --draft-max; -md alone drafts; /slots reports speculative.n_max.
//
// Like llama-server, it requires an API key (--api-key, a comma-separated
// list, or LLAMA_API_KEY; --api-key-file or LLAMA_ARG_API_KEY_FILE, one per
// line, "#" comments) on every route but /health, /v1/health, /models and
// /v1/models once it has one, and answers 401 "Invalid API Key" otherwise.
//
// Other knobs: FAKELLAMA_LOAD_MS (a 503 "Loading model" phase of that
// length), FAKELLAMA_TOKENS_PER_S (pace generated tokens; default: no pacing).
package fakellama

import (
	"context"
	"embed"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

//go:embed testdata/new-help.txt testdata/old-help.txt testdata/new-version.txt testdata/old-version.txt
//go:embed testdata/new-env-draft-max.txt testdata/new-flag-draft-max.txt testdata/old-flag-spec-draft-n-max.txt
//go:embed testdata/new-spec-completion.json testdata/old-spec-completion.json
//go:embed testdata/new-spec-completion-stream.txt testdata/old-spec-completion-stream.txt
//go:embed testdata/new-spec-v1-completions-stream.txt testdata/old-spec-v1-completions-stream.txt
//go:embed testdata/new-spec-props.json testdata/old-spec-props.json
//go:embed testdata/new-spec-slots-after.json testdata/old-spec-slots-after.json
//go:embed testdata/new-spec-v1-models.json testdata/old-spec-v1-models.json
//go:embed testdata/new-spec-metrics-after.txt testdata/old-spec-metrics-after.txt
//go:embed testdata/new-spec-server-stderr.txt testdata/new-slowload-health-sequence.txt
var captures embed.FS

func capture(name string) []byte {
	b, err := captures.ReadFile("testdata/" + name)
	if err != nil {
		panic("fakellama: missing capture " + name)
	}
	return b
}

// LoadingBody is the captured 503 body served while the model loads.
const LoadingBody = `{"error":{"message":"Loading model","type":"unavailable_error","code":503}}`

// Main runs the fake llama-server. args excludes the program name; env is
// the process environment (os.Environ()). It returns the exit code: 0 for
// --help, --version and after SIGTERM/SIGINT; 1 for the errors the real
// trees print (removed or unknown flags, a stale LLAMA_ARG_DRAFT_MAX).
func Main(args []string, env []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return run(ctx, args, env, stdout, stderr, nil)
}

type config struct {
	tree       string // "new" | "old"
	model      string
	draft      string
	specType   string
	nMax       int
	host       string
	port       int
	metrics    bool
	slots      bool
	nSlots     int
	npSet      bool // -np N (N > 0) given: kv_unified stays false, as in the real server
	noUI       bool // --no-ui / --no-webui
	nCtx       int
	alias      string
	loadMS     int
	tokensPerS float64
	apiKeys    []string // --api-key, LLAMA_API_KEY, --api-key-file, LLAMA_ARG_API_KEY_FILE
}

func (c *config) isNew() bool { return c.tree == "new" }

// drafting reports whether requests draft: NEW needs a draft-* spec type
// (and a draft model for the kinds that use one); OLD drafts with -md alone.
func (c *config) drafting() bool {
	if c.nMax < 1 {
		return false
	}
	if !c.isNew() {
		return c.draft != "" && c.nMax >= 2 // OLD drafts n_max-1 per round (see gen)
	}
	for _, t := range strings.Split(c.specType, ",") {
		switch t {
		case "draft-mtp":
			return true
		case "draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark":
			if c.draft != "" {
				return true
			}
		}
	}
	return false
}

// specTypes is NEW's "speculative.types" of a request: "none" plus the
// draft types that run.
func (c *config) specTypes() string {
	if !c.drafting() {
		return "none"
	}
	out := []string{"none"}
	for _, t := range strings.Split(c.specType, ",") {
		if strings.HasPrefix(t, "draft-") {
			out = append(out, t)
		}
	}
	return strings.Join(out, ",")
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, e := range env {
		if k, v, ok := strings.Cut(e, "="); ok {
			m[k] = v
		}
	}
	return m
}

// parse applies env then argv, as llama.cpp does (env first, CLI overrides).
// It returns an exit code >= 0 when the process should end now.
func parse(args []string, env map[string]string, stdout, stderr io.Writer) (*config, int) {
	c, code := knobs(env, stderr)
	if code >= 0 {
		return nil, code
	}
	help := string(capture(c.tree + "-help.txt"))
	byName, all := parseHelp(help)
	if code := c.applyEnv(all, env, stderr); code >= 0 {
		return nil, code
	}
	showHelp, showVersion, code := c.applyArgs(byName, args, stderr)
	if code >= 0 {
		return nil, code
	}
	if showHelp {
		io.WriteString(stdout, help)
		return nil, 0
	}
	if showVersion {
		stderr.Write(capture(c.tree + "-version.txt"))
		return nil, 0
	}
	if c.model == "" {
		io.WriteString(stderr, "error: no model given: pass -m FNAME (fakellama)\n")
		return nil, 1
	}
	if c.nCtx <= 0 {
		c.nCtx = 4096
	}
	if c.alias == "" {
		c.alias = c.model
	}
	return c, -1
}

// knobs reads the fake's own FAKELLAMA_* variables (tree, load time,
// pacing) into a config with the chosen tree's defaults. A bad value is
// the test's mistake, not llama-server's: exit code 2.
func knobs(env map[string]string, stderr io.Writer) (*config, int) {
	c := &config{tree: "new", host: "127.0.0.1", port: 8080, nSlots: 4, slots: true}
	if t := env["FAKELLAMA_TREE"]; t != "" {
		if t != "new" && t != "old" {
			fmt.Fprintf(stderr, "fakellama: FAKELLAMA_TREE=%q: want new or old\n", t)
			return nil, 2
		}
		c.tree = t
	}
	c.nMax = 3
	if !c.isNew() {
		c.nMax = 16
	}
	if v := env["FAKELLAMA_LOAD_MS"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fmt.Fprintf(stderr, "fakellama: FAKELLAMA_LOAD_MS=%q: want milliseconds\n", v)
			return nil, 2
		}
		c.loadMS = n
	}
	if v := env["FAKELLAMA_TOKENS_PER_S"]; v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			fmt.Fprintf(stderr, "fakellama: FAKELLAMA_TOKENS_PER_S=%q: want a rate\n", v)
			return nil, 2
		}
		c.tokensPerS = f
	}
	return c, -1
}

// applyEnv applies the options' LLAMA_ARG_* variables. A removed option's
// variable stops a NEW server (exit 1), as the real one does; a switch's
// variable counts only when it says on.
func (c *config) applyEnv(all []*option, env map[string]string, stderr io.Writer) int {
	for _, o := range all {
		if o.env == "" {
			continue
		}
		v, ok := env[o.env]
		if !ok || v == "" {
			continue
		}
		if o.removed {
			if o.env == "LLAMA_ARG_DRAFT_MAX" {
				stderr.Write(capture("new-env-draft-max.txt"))
			} else {
				io.WriteString(stderr, removedEnvError(o.env, o))
			}
			return 1
		}
		if o.nvals == 0 {
			switch v {
			case "1", "true", "on", "enabled":
				v = ""
			default:
				continue
			}
		}
		if msg, ok := c.apply(o, o.names[0], v); !ok {
			io.WriteString(stderr, msg)
			return 1
		}
	}
	return -1
}

// applyArgs applies argv over the environment, with the real trees'
// messages for an unknown, removed or valueless argument (exit 1). -h and
// --version are only noted: the whole command line is checked first.
func (c *config) applyArgs(byName map[string]*option, args []string, stderr io.Writer) (showHelp, showVersion bool, code int) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasEq := a, "", false
		if strings.HasPrefix(a, "--") {
			name, val, hasEq = strings.Cut(a, "=")
		}
		o, ok := byName[name]
		if !ok {
			stderr.Write(invalidArg(a))
			return false, false, 1
		}
		if o.removed {
			if a == "--draft-max" {
				stderr.Write(capture("new-flag-draft-max.txt"))
			} else {
				io.WriteString(stderr, removedArgError(name, o))
			}
			return false, false, 1
		}
		if o.nvals > 0 && !hasEq {
			if i+o.nvals >= len(args) {
				io.WriteString(stderr, "error while handling argument \""+name+"\": expected value for argument\n")
				return false, false, 1
			}
			val = args[i+1]
			i += o.nvals
		}
		switch {
		case o.has("-h"):
			showHelp = true
			continue
		case o.has("--version"):
			showVersion = true
			continue
		}
		if msg, ok := c.apply(o, name, val); !ok {
			io.WriteString(stderr, msg)
			return false, false, 1
		}
	}
	return showHelp, showVersion, -1
}

// apply sets the option o (spelled given) to val, one case per option the
// fake understands; options it does not model are accepted and ignored.
// A bad value returns the real tree's message and false.
func (c *config) apply(o *option, given, val string) (string, bool) {
	switch {
	case o.has("-m"):
		c.model = val
	case o.has("-md"):
		c.draft = val
	case o.has("--spec-type"):
		if !c.isNew() && strings.Contains(val, "draft-") {
			return "error: invalid argument: " + given + " " + val + "\n", false
		}
		c.specType = val
	case o.has("--spec-draft-n-max") || (!c.isNew() && o.has("--draft-max")):
		return setInt(&c.nMax, given, val)
	case o.has("--host"):
		c.host = val
	case o.has("--port"):
		return setInt(&c.port, given, val)
	case o.has("--metrics"):
		c.metrics = true
	case o.has("--no-slots"):
		c.slots = given != "--no-slots"
	case o.has("-np"):
		n, err := strconv.Atoi(val)
		if err != nil {
			return stoiError(given), false
		}
		if n > 0 {
			c.nSlots, c.npSet = n, true
		}
	case o.has("-c"):
		return setInt(&c.nCtx, given, val)
	case o.has("--ui"):
		c.noUI = strings.HasPrefix(given, "--no-")
	case o.has("-a"):
		c.alias, _, _ = strings.Cut(val, ",")
	case o.has("--api-key"):
		for _, k := range strings.Split(val, ",") {
			if k != "" {
				c.apiKeys = append(c.apiKeys, k)
			}
		}
	case o.has("--api-key-file"):
		b, err := os.ReadFile(val)
		if err != nil {
			return "error while handling argument \"" + given + "\": error: failed to open file '" + val + "'\n\n", false
		}
		for _, k := range strings.Split(string(b), "\n") {
			if k != "" && k[0] != '#' {
				c.apiKeys = append(c.apiKeys, k)
			}
		}
	}
	return "", true
}

// stoiError is the message llama.cpp prints when std::stoi rejects a
// number argument.
func stoiError(given string) string {
	return "error while handling argument \"" + given + "\": stoi\n"
}

// setInt sets *dst to the number val, or returns std::stoi's message.
func setInt(dst *int, given, val string) (string, bool) {
	n, err := strconv.Atoi(val)
	if err != nil {
		return stoiError(given), false
	}
	*dst = n
	return "", true
}

// invalidArg is the message both trees print for an argument they do not
// know; for --spec-draft-n-max (OLD) it is the captured bytes.
func invalidArg(a string) []byte {
	if a == "--spec-draft-n-max" {
		return capture("old-flag-spec-draft-n-max.txt")
	}
	return []byte("error: invalid argument: " + a + "\n")
}

// lockedWriter serialises writes from request goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// run is Main with a context (canceled = SIGTERM) and a hook that receives
// the listening address.
func run(ctx context.Context, args, env []string, stdout, stderr io.Writer, ready func(addr string)) int {
	c, code := parse(args, envMap(env), stdout, stderr)
	if c == nil {
		return code
	}
	log := &lockedWriter{w: stderr}
	s := newServer(c, log)
	s.logStart()
	ln, err := net.Listen("tcp", net.JoinHostPort(c.host, strconv.Itoa(c.port)))
	if err != nil {
		s.srvf("E", "llama_server", "couldn't bind HTTP server socket, hostname: %s, port: %d", c.host, c.port)
		return 1
	}
	addr := ln.Addr().(*net.TCPAddr)
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()
	if ready != nil {
		ready(addr.String())
	}
	// Loading: /health and the rest answer 503 until the model is "loaded".
	select {
	case <-time.After(time.Duration(c.loadMS) * time.Millisecond):
	case <-ctx.Done():
	}
	if ctx.Err() == nil {
		s.markLoaded(addr.Port)
	}
	select {
	case <-ctx.Done():
	case err := <-srvErr:
		s.srvf("E", "llama_server", "server error: %v", err)
		return 1
	}
	s.logStop()
	shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	return 0
}

// Start runs the fake in-process (for benchmarks that must not count a
// process boundary twice): args as llama-server's, env as KEY=VALUE. It
// returns once the server is listening and loaded; stop ends it.
func Start(args, env []string, stderr io.Writer) (addr string, stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, env, io.Discard, stderr, func(a string) { ready <- a }) }()
	select {
	case a := <-ready:
		stop := func() { cancel(); <-done }
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if resp, err := http.Get("http://" + a + "/health"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return a, stop, nil
				}
			}
		}
		stop()
		return "", nil, fmt.Errorf("fakellama at %s did not become ready", a)
	case code := <-done:
		cancel()
		return "", nil, fmt.Errorf("fakellama exited with %d before listening", code)
	}
}
