package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Lines as llama-server d32676d writes them (a request of 3 prompt and
// 16 eval tokens at width 4), once bare and once as serve prefixes them,
// with other lines between.
const sampleLog = `0.00.157.501 I slot print_timing: id  3 | task 2 | prompt eval time =       1.14 ms /     3 tokens (    0.38 ms per token,  2636.20 tokens per second)
0.00.157.506 I slot print_timing: id  3 | task 2 |        eval time =       4.93 ms /    16 tokens (    0.31 ms per token,  3246.75 tokens per second)
0.00.157.506 I slot print_timing: id  3 | task 2 |       total time =       6.07 ms /    19 tokens
0.00.157.511 I slot print_timing: id  3 | task 2 |    graphs reused =          3
0.00.157.514 I slot print_timing: id  3 | task 2 | draft acceptance = 1.00000 (   11 accepted /    11 generated), mean len =  3.75
2026-12-05T18:34:29Z INF width verified width=4
engine 2 | 4.41.930.183 W slot   operator(): id  3 | task 33589 | n_past was set to 83
engine 2 | 1.02.233.643 I slot print_timing: id  1 | task 104 | prompt eval time =      17.19 ms /   138 tokens (    0.12 ms per token,  8027.92 tokens per second)
engine 2 | 1.02.233.650 I slot print_timing: id  1 | task 104 |        eval time =     587.98 ms /   200 tokens (    2.94 ms per token,   340.15 tokens per second)
engine 2 | 1.02.233.660 I slot print_timing: id  1 | task 104 | draft acceptance rate = 0.37234 (  105 accepted /   282 generated)
`

func TestParse(t *testing.T) {
	rows, err := Parse(strings.NewReader(sampleLog))
	if err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{Engine: 1, Task: 2, Slot: 3, EngineS: 0.157501, PromptN: 3, PromptMS: 1.14, EvalN: 16, EvalMS: 4.93, DraftAccepted: 11, DraftTokens: 11},
		{Engine: 2, Task: 104, Slot: 1, EngineS: 62.233643, PromptN: 138, PromptMS: 17.19, EvalN: 200, EvalMS: 587.98, DraftAccepted: 105, DraftTokens: 282},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v, want %+v", rows, want)
	}
	for i := range want {
		g, w := rows[i], want[i]
		if d := g.EngineS - w.EngineS; d > 1e-9 || d < -1e-9 {
			t.Errorf("row %d: engine_s %v, want %v (minutes.seconds.ms.µs)", i, g.EngineS, w.EngineS)
		}
		g.EngineS = w.EngineS
		if g != w {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
	}
	if _, err := Parse(strings.NewReader(strings.Repeat("x", maxLine+1))); err == nil {
		t.Error("a line past maxLine was read")
	}
}

func TestPhases(t *testing.T) {
	rep := Report{Seconds: 20, Phases: []ReportPhase{{Clients: 1, Seconds: 10, Sent: 2}, {Clients: 4, Seconds: 10, Sent: 2}}}
	row := func(e int, s float64, n, acc, gen int) Row {
		return Row{Engine: e, EngineS: s, EvalN: n, DraftAccepted: acc, DraftTokens: gen}
	}
	// The run spans 5-25 s of engine time: the probe before it and the
	// 16-token request are left out; the last request counts in the last
	// phase.
	rows := []Row{row(1, 1, 200, 9, 9), row(1, 8, 200, 50, 100), row(1, 14.9, 200, 60, 100), row(1, 15, 16, 5, 5), row(1, 20, 200, 70, 100), row(1, 25, 200, 80, 100)}
	got, err := Phases(rows, rep, 50)
	if err != nil {
		t.Fatal(err)
	}
	want := []PhaseAcceptance{{Clients: 1, Requests: 2, Sent: 2, Accepted: 110, Generated: 200}, {Clients: 4, Requests: 2, Sent: 2, Accepted: 150, Generated: 200}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("phases %+v, want %+v", got, want)
	}
	if _, err := Phases(append(rows, row(2, 30, 200, 1, 1)), rep, 50); err == nil {
		t.Error("two engines' rows were cut into phases")
	}
	if _, err := Phases(rows, Report{Seconds: 20}, 50); err == nil {
		t.Error("a report with no phases was accepted")
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
	log := write("serve.log", sampleLog)
	one := write("one.log", strings.Join(strings.Split(sampleLog, "\n")[:5], "\n"))
	cases := []struct {
		name string
		args []string
		code int
		out  string // in stdout (code 0) or stderr
	}{
		{"table", []string{log}, 0, "1\t2\t3\t0.158\t3\t1.14\t16\t4.93\t11\t11\n"},
		{"no file", []string{filepath.Join(dir, "none.log")}, 2, "no such file"},
		{"no argument", nil, 2, "want one log file"},
		{"no timings", []string{write("empty.log", "2026-12-05T18:34:29Z INF ready\n")}, 2, "no llama-server `slot print_timing` line"},
		{"follow, two engines", []string{"-follow", write("r.json", `{"seconds": 1, "phases": [{"clients": 1, "seconds": 1, "sent": 1}]}`), log}, 2, "more than one engine"},
		{"follow, not a report", []string{"-follow", write("bad.json", `[`), one}, 2, "not a followeval report"},
		{"follow", []string{"-min-tokens", "1", "-follow", filepath.Join(dir, "r.json"), one}, 0, "1\t1\t1\t1\t11\t11\t1.0000\n"},
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
