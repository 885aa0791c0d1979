// Command enginetimings reads llama-server's per-request timings
// (`slot print_timing` lines) from a `speclaunch serve` log, where each
// engine's lines carry the prefix `engine N | `, or from a llama-server
// log of its own (engine 1). It writes one row per request: engine, task,
// slot, the seconds since that engine started when the request ended,
// prompt and eval tokens and milliseconds, and draft tokens accepted and
// generated. docs/benchmark_results/follow/h100-2026-12-05b/'s
// engine-timings-*.tsv files are its output.
//
//	go run ./scripts/enginetimings serve.log > engine-timings.tsv
//
// With -follow, the serve ran one engine (a fixed width) under
// scripts/followeval, and it prints each phase's draft acceptance instead:
// the run starts at the last request's end less the report's length,
// phases are cut at the report's phase lengths, a request counts in the
// phase it ended in (the last in the last phase), and only requests of at
// least -min-tokens eval tokens count (speclaunch's own verification
// requests are 16).
//
//	go run ./scripts/enginetimings -follow follow.json serve.log
//
// With -warm, it prints how each engine's requests ran by the seconds
// since its first one began, over the median of those that began 20 s or
// more after it (the question of a new engine that runs slow beside the
// old one's drain after a switch), and the median over the engines after
// the first of each kind, classic and drafting.
//
//	go run ./scripts/enginetimings -warm -min-tokens 100 serve.log
//
// -follow and -warm also read the command's own .tsv output (a file
// named *.tsv) in place of a log.
//
// Exit status: 0, or 2 for bad input (a file that cannot be read, no
// print_timing line, -follow over several engines).
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/speclaunch/speclaunch/engine"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// Row is one request's timings.
type Row struct {
	Engine, Task, Slot int
	// EngineS is when the request ended, in seconds since its engine
	// started (llama-server's log clock).
	EngineS                    float64
	PromptN, EvalN             int
	PromptMS, EvalMS           float64
	DraftAccepted, DraftTokens int
}

var (
	// timingRE is a print_timing line: llama-server's clock is
	// minutes.seconds.milliseconds.microseconds since it started.
	timingRE = regexp.MustCompile(`^(?:engine (\d+) \| )?(\d+)\.(\d+)\.(\d+)\.(\d+) I slot print_timing: id\s+(\d+) \| task (\d+) \| (.*)$`)
	promptRE = regexp.MustCompile(`^prompt eval time =\s*([0-9.]+) ms /\s*(\d+) tokens`)
	evalRE   = regexp.MustCompile(`^\s*eval time =\s*([0-9.]+) ms /\s*(\d+) tokens`)
)

// maxLine bounds one log line read; a longer line (never a print_timing
// line, which is under 200 bytes) is skipped whole, so memory stays bounded.
const maxLine = 64 << 10

// errRepeat is a request seen twice in one engine's lines.
var errRepeat = errors.New("the log holds two runs under one engine number (a restarted llama-server, logs appended, or serve --raw-engine-output, whose lines carry no engine number): split it into one file per run")

// Parse reads the rows of a log, ordered by engine and end time. A row's
// time is that of its last timing line (eval or draft acceptance; the
// progress lines of a long request come earlier).
func Parse(r io.Reader) ([]Row, error) {
	rows := map[reqKey]*Row{}
	untimed := 0 // print_timing lines without llama.cpp's clock
	br := bufio.NewReaderSize(r, maxLine)
	for {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			b = nil
		}
		if len(b) > 0 {
			line := strings.TrimRight(string(b), "\r\n")
			m := timingRE.FindStringSubmatch(line)
			if m == nil && strings.Contains(line, "print_timing") {
				untimed++
			}
			if m != nil {
				if err := add(rows, m); err != nil {
					return nil, err
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(rows) == 0 && untimed > 0 {
		return nil, fmt.Errorf("%d print_timing lines without llama.cpp's clock (an older llama-server, or serve --log-format json): only llama-server d32676d's text log is read", untimed)
	}
	out := make([]Row, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Engine, b.Engine), cmp.Compare(a.EngineS, b.EngineS), cmp.Compare(a.Task, b.Task))
	})
	return out, nil
}

// reqKey is a request: task ids are an engine's own.
type reqKey struct{ engine, task int }

// add takes one print_timing line's match into its request's row.
func add(rows map[reqKey]*Row, m []string) error {
	e := 1
	if m[1] != "" {
		e = atoi(m[1])
	}
	k := reqKey{e, atoi(m[7])}
	t := float64(atoi(m[2]))*60 + float64(atoi(m[3])) + float64(atoi(m[4]))/1e3 + float64(atoi(m[5]))/1e6
	rest := m[8]
	row := rows[k]
	p := promptRE.FindStringSubmatch(rest)
	v := evalRE.FindStringSubmatch(rest)
	a, isAcc := engine.ParseLlamaAcceptance(rest)
	if p == nil && v == nil && !isAcc {
		return nil // progress, total time, graphs reused
	}
	if row == nil {
		row = &Row{Engine: e, Task: k.task, Slot: atoi(m[6])}
		rows[k] = row
	} else if p != nil && row.PromptN+row.EvalN > 0 {
		return fmt.Errorf("engine %d, task %d: %w", e, k.task, errRepeat)
	}
	row.EngineS = t
	switch {
	case p != nil:
		row.PromptMS, row.PromptN = atof(p[1]), atoi(p[2])
	case v != nil:
		row.EvalMS, row.EvalN = atof(v[1]), atoi(v[2])
	default:
		row.DraftAccepted, row.DraftTokens = a.Accepted, a.Generated
	}
	return nil
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func atof(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// Report is what -follow reads of a followeval report.
type Report struct {
	Seconds float64       `json:"seconds"`
	Phases  []ReportPhase `json:"phases"`
}

// ReportPhase is one phase of a followeval report.
type ReportPhase struct {
	Clients int     `json:"clients"`
	Seconds float64 `json:"seconds"`
	Sent    int     `json:"sent"`
}

// PhaseAcceptance is one phase's draft acceptance.
type PhaseAcceptance struct {
	Clients, Requests, Sent int
	Accepted, Generated     int
}

// Phases cuts one engine's rows at the report's phases (see the package
// comment). Rows below minTokens eval tokens are left out.
func Phases(rows []Row, rep Report, minTokens int) ([]PhaseAcceptance, error) {
	if len(rows) == 0 {
		return nil, errors.New("no requests")
	}
	if len(rep.Phases) == 0 || rep.Seconds <= 0 {
		return nil, errors.New("the report has no phases")
	}
	for _, r := range rows {
		if r.Engine != rows[0].Engine {
			return nil, errors.New("the log has more than one engine; per-phase acceptance needs a serve that ran one (a fixed width)")
		}
	}
	last := rows[len(rows)-1].EngineS
	bounds := []float64{last - rep.Seconds}
	out := make([]PhaseAcceptance, len(rep.Phases))
	for i, p := range rep.Phases {
		bounds = append(bounds, bounds[i]+p.Seconds)
		out[i].Clients, out[i].Sent = p.Clients, p.Sent
	}
	for _, r := range rows {
		if r.EvalN < minTokens || r.EngineS < bounds[0] {
			continue
		}
		i := len(out) - 1 // the last request in the last phase
		for j := range out {
			if r.EngineS < bounds[j+1] {
				i = j
				break
			}
		}
		out[i].Requests++
		out[i].Accepted += r.DraftAccepted
		out[i].Generated += r.DraftTokens
	}
	return out, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("enginetimings", flag.ContinueOnError)
	fs.SetOutput(stderr)
	follow := fs.String("follow", "", "a followeval report (JSON) of a run on one engine: print each phase's draft acceptance")
	warm := fs.Bool("warm", false, "print how each engine's requests ran by the seconds since its first one began, against its own later ones")
	minTokens := fs.Int("min-tokens", 50, "with -follow or -warm, count only requests of at least this many eval tokens")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "enginetimings: "+format+"\n", a...)
		return 2
	}
	if *warm && *follow != "" {
		return bad("give -warm or -follow, not both")
	}
	if fs.NArg() != 1 {
		return bad("want one log file, got %d arguments (usage: enginetimings [-follow report.json | -warm] serve.log)", fs.NArg())
	}
	name := fs.Arg(0)
	f, err := os.Open(name)
	if err != nil {
		return bad("%v", err)
	}
	defer f.Close()
	parse := Parse
	if strings.HasSuffix(name, ".tsv") {
		parse = ParseTSV
	}
	rows, err := parse(f)
	if err != nil {
		return bad("%s: %v", name, err)
	}
	if len(rows) == 0 {
		return bad("%s: no llama-server `slot print_timing` line (is it a serve log of a llama.cpp engine, at the default --log-level?)", name)
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if *warm {
		writeWarm(w, Warm(rows, *minTokens))
		return 0
	}
	if *follow == "" {
		fmt.Fprintf(w, "# llama-server print_timing per request, from %s; engine_s: seconds since the engine started, when the request ended\n", name)
		fmt.Fprintln(w, tsvHeader)
		for _, r := range rows {
			fmt.Fprintf(w, "%d\t%d\t%d\t%.3f\t%d\t%.2f\t%d\t%.2f\t%d\t%d\n", r.Engine, r.Task, r.Slot, r.EngineS, r.PromptN, r.PromptMS, r.EvalN, r.EvalMS, r.DraftAccepted, r.DraftTokens)
		}
		return 0
	}
	b, err := os.ReadFile(*follow)
	if err != nil {
		return bad("%v", err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return bad("%s: not a followeval report: %v", *follow, err)
	}
	ps, err := Phases(rows, rep, *minTokens)
	if err != nil {
		return bad("%s with %s: %v", name, *follow, err)
	}
	fmt.Fprintln(w, "phase\tclients\trequests\tsent\tdraft_accepted\tdraft_generated\tacceptance")
	for i, p := range ps {
		acc := 0.0
		if p.Generated > 0 {
			acc = float64(p.Accepted) / float64(p.Generated)
		}
		fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%d\t%.4f\n", i+1, p.Clients, p.Requests, p.Sent, p.Accepted, p.Generated, acc)
	}
	return 0
}
