package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The files under testdata/h200 are what a real llama-server printed and
// answered on an NVIDIA H200 (2026-11-30): llama.cpp unslothai fork d32676d
// built from a source archive, started by `speclaunch serve` as
//
//	llama-server -m target-Q4_0.gguf --spec-draft-model draft-Q8_0.gguf
//	  --spec-type draft-simple --spec-draft-n-max 5 ... --metrics -np 1
//
// (width 6, from a stale LLAMA_ARG_DRAFT_MAX=5 the launcher translated and
// kept out of the child's environment). The probe-like requests asked for
// 16 tokens. These tests pin what the launcher's parsers read from them.

func readH200(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "h200", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lastSSEData is the payload of the last "data: " line of an SSE body that
// is not [DONE], with its "data: " prefix (ParseTimings accepts it).
func lastSSEData(t testing.TB, body []byte) []byte {
	t.Helper()
	var last []byte
	for _, l := range bytes.Split(body, []byte("\n")) {
		if !bytes.HasPrefix(l, []byte("data:")) || bytes.Equal(bytes.TrimSpace(l[5:]), []byte("[DONE]")) {
			continue
		}
		last = l
	}
	if last == nil {
		t.Fatal("no data event")
	}
	return last
}

func TestH200Version(t *testing.T) {
	// A build from a source archive has no git history, so llama.cpp's
	// build number (the commit count) is 0: `version: 0 (d32676d)`, and
	// /props build_info "b0-d32676d". The commit is still there.
	out := string(readH200(t, "version.txt"))
	v, c := ParseLlamaVersion(out)
	if v != "0 (d32676d)" || c != "d32676d" {
		t.Errorf("ParseLlamaVersion = %q, %q; want %q, %q", v, c, "0 (d32676d)", "d32676d")
	}
	var props struct {
		BuildInfo string `json:"build_info"`
	}
	if err := json.Unmarshal(readH200(t, "props.json"), &props); err != nil || props.BuildInfo != "b0-d32676d" {
		t.Errorf("props build_info %q, %v", props.BuildInfo, err)
	}
}

func TestH200Timings(t *testing.T) {
	const want = "predicted_n 16, draft_n 32, draft_n_accepted 8"
	check := func(name string, tm Timings, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !tm.HasDraft || tm.PredictedN != 16 || tm.DraftN != 32 || tm.DraftAccepted != 8 || tm.DraftRounds != 0 {
			t.Errorf("%s: %+v; want %s, HasDraft", name, tm, want)
		}
		if tm.PredictedMS <= 0 || tm.PredictedPerSecond <= 0 {
			t.Errorf("%s: no decode time: %+v", name, tm)
		}
	}
	tm, err := ParseTimings(readH200(t, "completion.json"))
	check("completion.json", tm, err)
	if tm.PromptN != 7 || tm.PredictedMS != 49.656 {
		t.Errorf("completion.json: prompt_n %d predicted_ms %v; want 7, 49.656", tm.PromptN, tm.PredictedMS)
	}

	for _, tc := range []struct {
		file     string
		promptN  int
		predMS   float64
		usageTok int // 0: native stream, no usage
	}{
		{"completion-stream.txt", 1, 39.637, 0},
		{"v1-completions-stream.txt", 1, 38.136, 16},
	} {
		body := readH200(t, tc.file)
		last := lastSSEData(t, body)
		tm, err := ParseTimings(last)
		check(tc.file, tm, err)
		if tm.PromptN != tc.promptN || tm.PredictedMS != tc.predMS {
			t.Errorf("%s: prompt_n %d predicted_ms %v; want %d, %v", tc.file, tm.PromptN, tm.PredictedMS, tc.promptN, tc.predMS)
		}
		var ev struct {
			Stop            *bool `json:"stop"`
			TokensPredicted int   `json:"tokens_predicted"`
			Usage           *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Choices []struct {
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(bytes.TrimPrefix(last, []byte("data:"))), &ev); err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if tc.usageTok == 0 {
			// Native stream: the final event is the stop event, and no [DONE] follows.
			if ev.Stop == nil || !*ev.Stop || ev.TokensPredicted != 16 {
				t.Errorf("%s: final event stop %v tokens_predicted %d", tc.file, ev.Stop, ev.TokensPredicted)
			}
			if bytes.Contains(body, []byte("[DONE]")) {
				t.Errorf("%s: native stream has [DONE]", tc.file)
			}
			continue
		}
		if ev.Usage == nil || ev.Usage.CompletionTokens != tc.usageTok {
			t.Errorf("%s: usage %+v; want completion_tokens %d", tc.file, ev.Usage, tc.usageTok)
		}
		if len(ev.Choices) != 1 || ev.Choices[0].FinishReason == nil || *ev.Choices[0].FinishReason != "length" {
			t.Errorf("%s: final chunk choices %+v; want finish_reason length", tc.file, ev.Choices)
		}
		if !bytes.HasSuffix(body, []byte("data: [DONE]\n\n")) {
			t.Errorf("%s: does not end with data: [DONE]", tc.file)
		}
	}
}

func TestH200MetricsPositions(t *testing.T) {
	// Before any request the per-position family is absent: 0, no error
	// (VerifyLlama then says speculation is not measurable).
	if n, err := ParseMetricsPositions(string(readH200(t, "metrics.txt"))); n != 0 || err != nil {
		t.Errorf("metrics.txt: %d, %v; want 0, nil", n, err)
	}
	if strings.Contains(string(readH200(t, "metrics.txt")), PerPosMetric) {
		t.Error("metrics.txt: the per-position family is present before any request")
	}
	// After drafted requests: one label per draft position = n_max 5 (width 6),
	// zero counters included.
	after := string(readH200(t, "metrics-after.txt"))
	if n, err := ParseMetricsPositions(after); n != 5 || err != nil {
		t.Errorf("metrics-after.txt: %d, %v; want 5, nil", n, err)
	}
	for _, l := range []string{PerPosMetric + `{position="4"} 0`, "llamacpp:spec_decode_num_drafts_total 28", "llamacpp:spec_decode_num_draft_tokens_total 128"} {
		if !strings.Contains(after, l+"\n") {
			t.Errorf("metrics-after.txt lacks %q", l)
		}
	}
}

func TestH200Acceptance(t *testing.T) {
	a, _ := For(mustEngine("llama.cpp"))
	var accs []Acceptance
	n := 0
	for _, l := range strings.Split(strings.TrimRight(string(readH200(t, "server-stderr.txt")), "\n"), "\n") {
		n++
		if acc, ok := ParseLlamaAcceptance(l); ok {
			accs = append(accs, acc)
		}
		o, ok := a.ObserveLine(l)
		isAcc := strings.Contains(l, "draft acceptance = ")
		if ok != isAcc {
			t.Errorf("ObserveLine(%q) ok=%v", l, ok)
		}
		// llama-server at default verbosity never states its width and
		// never declines: only the acceptance lines are observed, as
		// "speculative, width not stated".
		if o.Width != 0 || o.Declined || o.Error != "" || o.Kind != "" {
			t.Errorf("ObserveLine(%q) = %+v", l, o)
		}
		if ok && (!o.Speculative || o.Line != l) {
			t.Errorf("ObserveLine(%q) = %+v; want Speculative with the line", l, o)
		}
	}
	if n != 52 {
		t.Errorf("server-stderr.txt: %d lines, want 52", n)
	}
	if len(accs) != 4 {
		t.Fatalf("%d acceptance lines, want 4 (one per request)", len(accs))
	}
	for i, acc := range accs {
		if acc.Rate != 0.25 || acc.Accepted != 8 || acc.Generated != 32 || !acc.HasMeanLen || acc.MeanLen != 2.14 {
			t.Errorf("acceptance %d: %+v; want 0.25, 8/32, mean len 2.14", i, acc)
		}
		// mean len counts the bonus token: 8 accepted over 7 verify steps
		// (28 spec_decode_num_drafts_total / 4 requests in metrics-after).
		if s := acc.Steps(); math.Round(s) != 7 {
			t.Errorf("acceptance %d: Steps() = %v, want about 7", i, s)
		}
	}

	// The default-width run's engine lines, as the launcher relayed them.
	var got []Acceptance
	for _, l := range strings.Split(string(readH200(t, "speclaunch-serve-default.log")), "\n") {
		l, ok := strings.CutPrefix(l, "engine | ")
		if !ok {
			continue
		}
		o, ok := a.ObserveLine(l)
		if ok != strings.Contains(l, "draft acceptance = ") || o.Width != 0 || o.Declined || o.Error != "" {
			t.Errorf("default run: ObserveLine(%q) = %+v, %v", l, o, ok)
		}
		if acc, ok := ParseLlamaAcceptance(l); ok {
			got = append(got, acc)
		}
	}
	want := []Acceptance{{0.47059, 8, 17, 2.33, true}, {0.88889, 16, 18, 3.67, true}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("default run acceptance %+v, want %+v", got, want)
	}
}

func TestH200Slots(t *testing.T) {
	before, after := readH200(t, "slots.json"), readH200(t, "slots-after.json")
	// The 2026 tree reports no n_max in /slots, before or after a request.
	for name, b := range map[string][]byte{"slots.json": before, "slots-after.json": after} {
		if n, err := ParseSlotsNMax(b); err == nil {
			t.Errorf("%s: ParseSlotsNMax = %d, want an error", name, n)
		}
	}
	_, err := ParseSlotNMax(after, 0)
	if err == nil || !strings.Contains(err.Error(), "slot 0 has no speculative.n_max") {
		t.Errorf("ParseSlotNMax(slots-after, 0) = %v; want no n_max in slot 0", err)
	}
	var slots []struct {
		ID          int                        `json:"id"`
		Speculative *bool                      `json:"speculative"`
		Params      map[string]json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(after, &slots); err != nil {
		t.Fatal(err)
	}
	if len(slots) != 1 || slots[0].ID != 0 || slots[0].Speculative == nil || !*slots[0].Speculative {
		t.Fatalf("slots-after: %+v; want one slot 0 with speculative true", slots)
	}
	if got := string(slots[0].Params["speculative.types"]); got != `"none,draft-simple"` {
		t.Errorf("slot params speculative.types %s", got)
	}
	for k := range slots[0].Params {
		if strings.Contains(k, "n_max") {
			t.Errorf("slot params have %q", k)
		}
	}
}

// VerifyLlama against the real answers: the probe response drafted, and
// /metrics (read after it) has 5 labels, so width 6.
func TestH200VerifyLlama(t *testing.T) {
	completion, metrics, slots := readH200(t, "completion.json"), readH200(t, "metrics-after.txt"), readH200(t, "slots-after.json")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "POST /completion":
			w.Write(completion)
		case "GET /metrics":
			w.Write(metrics)
		case "GET /slots":
			w.Write(slots)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	for _, sp := range []Spelling{Spelling2026, SpellingUnknown} {
		o, err := VerifyLlama(context.Background(), srv.URL, sp, srv.Client())
		if err != nil {
			t.Fatalf("%q: %v", sp, err)
		}
		want := Observation{Speculative: true, Width: 6, Kind: "draft-simple",
			From: "/metrics " + PerPosMetric + ": 5 positions = n_max 5",
			Line: "llama-server drafts: probe drafted 32, accepted 8; width 6 (/metrics " + PerPosMetric + ": 5 positions = n_max 5)"}
		if o != want {
			t.Errorf("%q: %+v\nwant %+v", sp, o, want)
		}
	}
	// Read as a legacy tree it must not invent a width from /slots.
	if o, err := VerifyLlama(context.Background(), srv.URL, SpellingLegacy, srv.Client()); err == nil || !strings.Contains(err.Error(), "slot 0 has no speculative.n_max") {
		t.Errorf("legacy: %+v, %v; want an error: no n_max in slot 0", o, err)
	}
}
