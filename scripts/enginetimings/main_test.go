package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// request is one request's lines as llama-server d32676d writes them
// (internal/fakellama/testdata/new-spec-server-stderr.txt, task 2): 3
// prompt and 16 eval tokens at width 4.
const request = `0.00.157.501 I slot print_timing: id  3 | task 2 | prompt eval time =       1.14 ms /     3 tokens (    0.38 ms per token,  2636.20 tokens per second)
0.00.157.506 I slot print_timing: id  3 | task 2 |        eval time =       4.93 ms /    16 tokens (    0.31 ms per token,  3246.75 tokens per second)
0.00.157.506 I slot print_timing: id  3 | task 2 |       total time =       6.07 ms /    19 tokens
0.00.157.511 I slot print_timing: id  3 | task 2 |    graphs reused =          3
0.00.157.514 I slot print_timing: id  3 | task 2 | draft acceptance = 1.00000 (   11 accepted /    11 generated), mean len =  3.75
`

var task2 = Row{Engine: 1, Task: 2, Slot: 3, EngineS: 0.157514, PromptN: 3, PromptMS: 1.14, EvalN: 16, EvalMS: 4.93, DraftAccepted: 11, DraftTokens: 11}

// line is a print_timing line of engine e (0: no prefix) at clock c.
func line(e int, c, rest string) string {
	p := ""
	if e > 0 {
		p = "engine " + string(rune('0'+e)) + " | "
	}
	return p + c + " I slot print_timing: id  1 | " + rest + "\n"
}

func TestParse(t *testing.T) {
	long := strings.Repeat("x", 100<<10) + "\n"
	cases := []struct {
		name string
		log  string
		want []Row
		err  string
	}{
		{"one request, bare", request, []Row{task2}, ""},
		{"CRLF", strings.ReplaceAll(request, "\n", "\r\n"), []Row{task2}, ""},
		{"a long line is skipped", long + request, []Row{task2}, ""},
		{"other lines", "2026-12-05T18:34:29Z INF ready\n" + request + "engine 1 | 0.00.200.000 W slot   operator(): id  3 | task 9 | n_past was set to 83\n", []Row{task2}, ""},
		// A long request's progress line comes first; the row's time is its
		// last timing line's, and the older acceptance form is read.
		{"progress, then the end, serve's prefix", line(2, "1.00.100.000", "task 104 | n_decoded =    116, tg =  38.47 t/s, tg_3s =  38.47 t/s") +
			line(2, "1.02.233.643", "task 104 | prompt eval time =      17.19 ms /   138 tokens (    0.12 ms per token,  8027.92 tokens per second)") +
			line(2, "1.02.233.650", "task 104 |        eval time =     587.98 ms /   200 tokens (    2.94 ms per token,   340.15 tokens per second)") +
			line(2, "1.02.233.660", "task 104 | draft acceptance rate = 0.37234 (  105 accepted /   282 generated)"),
			[]Row{{Engine: 2, Task: 104, Slot: 1, EngineS: 62.23366, PromptN: 138, PromptMS: 17.19, EvalN: 200, EvalMS: 587.98, DraftAccepted: 105, DraftTokens: 282}}, ""},
		// Rows sort by end time, then task.
		{"order", line(1, "0.00.300.000", "task 3 |        eval time =       1.00 ms /    16 tokens") +
			line(1, "0.00.100.000", "task 7 |        eval time =       1.00 ms /    16 tokens") +
			line(1, "0.00.100.000", "task 5 |        eval time =       1.00 ms /    16 tokens"),
			[]Row{{Engine: 1, Task: 5, Slot: 1, EngineS: 0.1, EvalN: 16, EvalMS: 1}, {Engine: 1, Task: 7, Slot: 1, EngineS: 0.1, EvalN: 16, EvalMS: 1}, {Engine: 1, Task: 3, Slot: 1, EngineS: 0.3, EvalN: 16, EvalMS: 1}}, ""},
		// What follows the first maxLine bytes of a long line is no line.
		{"the end of a long line", strings.Repeat("x", maxLine) + strings.SplitAfter(request, "\n")[0], nil, ""},
		{"the start of a long line", strings.TrimSuffix(strings.SplitAfter(request, "\n")[0], "\n") + strings.Repeat("x", maxLine) + "\n", nil, ""},
		{"a restart under one engine number", request + request, nil, "two runs under one engine number"},
		{"no clock", "slot print_timing: id  3 | task 2 | \nprompt eval time =       1.14 ms /     3 tokens\n", nil, "without llama.cpp's clock"},
		{"nothing", "2026-12-05T18:34:29Z INF ready\n", nil, ""},
	}
	for _, tc := range cases {
		rows, err := Parse(strings.NewReader(tc.log))
		if tc.err != "" || err != nil {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.err)
			}
			continue
		}
		if len(rows) != len(tc.want) {
			t.Errorf("%s: rows %+v, want %+v", tc.name, rows, tc.want)
			continue
		}
		for i, w := range tc.want {
			g := rows[i]
			if d := g.EngineS - w.EngineS; d > 1e-9 || d < -1e-9 {
				t.Errorf("%s: row %d ends at %v, want %v (minutes.seconds.ms.µs)", tc.name, i, g.EngineS, w.EngineS)
			}
			g.EngineS = w.EngineS
			if g != w {
				t.Errorf("%s: row %d %+v, want %+v", tc.name, i, g, w)
			}
		}
	}
	if _, err := Parse(strings.NewReader(request + request)); !errors.Is(err, errRepeat) {
		t.Errorf("a restart: %v, want errRepeat", err)
	}
}

// The capture itself, as the repository holds it.
func TestParseCapture(t *testing.T) {
	f, err := os.Open("../../internal/fakellama/testdata/new-spec-server-stderr.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0] != task2 || rows[2].Task != 14 {
		t.Errorf("the capture's rows %+v, want tasks 2, 8, 14, the first %+v", rows, task2)
	}
}

func TestPhases(t *testing.T) {
	rep := Report{Seconds: 20, Phases: []ReportPhase{{Clients: 1, Seconds: 10, Sent: 2}, {Clients: 4, Seconds: 10, Sent: 2}}}
	row := func(e int, s float64, n, acc, gen int) Row {
		return Row{Engine: e, EngineS: s, EvalN: n, DraftAccepted: acc, DraftTokens: gen}
	}
	// The run spans 5-25 s of engine time.
	rows := []Row{row(1, 1, 200, 9, 9), row(1, 5, 50, 1, 2), row(1, 8, 200, 50, 100), row(1, 14.9, 200, 60, 100), row(1, 15, 49, 5, 5), row(1, 20, 200, 70, 100), row(1, 25, 200, 80, 100)}
	cases := []struct {
		name string
		rows []Row
		rep  Report
		want []PhaseAcceptance
		err  string
	}{
		// The probe before the run and the 49-token request are left out;
		// one of exactly 50 at the run's start counts; the last request
		// counts in the last phase.
		{"cut", rows, rep, []PhaseAcceptance{{Clients: 1, Requests: 3, Sent: 2, Accepted: 111, Generated: 202}, {Clients: 4, Requests: 2, Sent: 2, Accepted: 150, Generated: 200}}, ""},
		{"two engines", append(rows[:len(rows):len(rows)], row(2, 30, 200, 1, 1)), rep, nil, "more than one engine"},
		{"no phases", rows, Report{Seconds: 20}, nil, "no phases"},
		{"no length", rows, Report{Phases: rep.Phases}, nil, "no phases"},
		{"no requests", nil, rep, nil, "no requests"},
	}
	for _, tc := range cases {
		got, err := Phases(tc.rows, tc.rep, 50)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: phase %d %+v, want %+v", tc.name, i+1, got[i], tc.want[i])
			}
		}
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	log := write("serve.log", request+strings.ReplaceAll(request, "0.00.", "engine 2 | 0.00."))
	one := write("one.log", request)
	report := write("r.json", `{"seconds": 1, "phases": [{"clients": 1, "seconds": 1, "sent": 1}]}`)
	cases := []struct {
		name string
		args []string
		code int
		out  string // in stdout (code 0) or stderr
	}{
		{"table", []string{log}, 0, "# llama-server print_timing per request, from " + log + ";"},
		{"a row", []string{log}, 0, "\n2\t2\t3\t0.158\t3\t1.14\t16\t4.93\t11\t11\n"},
		{"no file", []string{filepath.Join(dir, "none.log")}, 2, "no such file"},
		{"no argument", nil, 2, "want one log file"},
		{"no timings", []string{write("empty.log", "2026-12-05T18:34:29Z INF ready\n")}, 2, "no llama-server `slot print_timing` line"},
		{"a restart", []string{write("twice.log", request+request)}, 2, "twice.log: engine 1, task 2: the log holds two runs"},
		{"follow, two engines", []string{"-follow", report, log}, 2, "more than one engine"},
		{"follow, not a report", []string{"-follow", write("bad.json", `[`), one}, 2, "not a followeval report"},
		{"follow", []string{"-min-tokens", "1", "-follow", report, one}, 0, "1\t1\t1\t1\t11\t11\t1.0000\n"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		text := out.String()
		if tc.code != 0 {
			text = errb.String()
		}
		if code != tc.code || !strings.Contains(text, tc.out) {
			t.Errorf("%s: exit %d, output %q; want exit %d with %q", tc.name, code, text, tc.code, tc.out)
		}
	}
}
