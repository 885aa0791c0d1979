package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// req is a request of 100 tokens at msPerToken that began at begin
// seconds on engine e.
func req(e int, begin, msPerToken float64, drafted int) Row {
	return Row{Engine: e, EngineS: begin + msPerToken*100/1e3, EvalN: 100, EvalMS: msPerToken * 100, DraftTokens: drafted}
}

func TestWarm(t *testing.T) {
	var rows []Row
	// Engine 2 (classic) runs 1.5x slow for its first 2 s, then steady at 4 ms.
	for _, b := range []float64{10, 10.5, 11.5} {
		rows = append(rows, req(2, b, 6, 0))
	}
	for _, b := range []float64{13, 16, 21, 31, 32, 33, 34, 35} {
		rows = append(rows, req(2, b, 4, 0))
	}
	// Engine 3 (drafting) has too few steady requests to be reported.
	for _, b := range []float64{1, 22, 23} {
		rows = append(rows, req(3, b, 3, 10))
	}
	// A short request does not count, nor set the start.
	rows = append(rows, Row{Engine: 2, EngineS: 5, EvalN: 16, EvalMS: 1})
	ws := Warm(rows, 50)
	if len(ws) != 1 || ws[0].Engine != 2 || !ws[0].Classic {
		t.Fatalf("engines %+v, want engine 2 alone, classic", ws)
	}
	w := ws[0]
	wantN := []int{3, 1, 1, 1, 5}
	wantR := []float64{1.5, 1, 1, 1, 1}
	for i := range wantN {
		if w.N[i] != wantN[i] || w.Ratio[i] != wantR[i] {
			t.Errorf("bin %d: %d requests at %.3f, want %d at %.3f", i, w.N[i], w.Ratio[i], wantN[i], wantR[i])
		}
	}
	var b strings.Builder
	writeWarm(&b, ws)
	if !strings.Contains(b.String(), "classic: median ratio a bin (engines)\t0-2s 1.500 (1)") {
		t.Errorf("summary:\n%s", b.String())
	}
}

// The command's own output reads back as the rows it was written from
// (to the printed precision), so -warm runs on a committed .tsv.
func TestParseTSV(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "serve.log")
	if err := os.WriteFile(log, []byte(request), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if rc := run([]string{log}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	want := task2
	want.EngineS = 0.158 // printed to the millisecond
	for _, tc := range []struct {
		name, in string
		want     []Row
		err      string
	}{
		{"own output", out.String(), []Row{want}, ""},
		{"not a header", "engine\ttask\n1\t2\n", nil, "line 1: not an engine-timings header"},
		{"a short row", tsvHeader + "\n1\t2\t3\n", nil, "line 2:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, err := ParseTSV(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(rows, tc.want) {
				t.Fatalf("rows %+v err %v, want %+v", rows, err, tc.want)
			}
		})
	}
}

// -warm and -follow are two reports: both at once is bad input, not one
// of them silently.
func TestWarmAndFollow(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"-warm", "-follow", "/nonexistent.json", "serve.log"}, &out, &errb); rc != 2 || !strings.Contains(errb.String(), "not both") {
		t.Errorf("rc %d, stderr %q: want 2 and the reason", rc, errb.String())
	}
}
