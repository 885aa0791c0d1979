package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/record"
)

// testdata/h200-completion-stream.txt is a copy of
// engine/testdata/h200/completion-stream.txt: a real llama-server's
// streamed /completion on an H200 (2026-11-30; d32676d, draft-simple,
// n_max 5, n_predict 16).
func TestClientH200Stream(t *testing.T) {
	ts := replay(t, golden(t, "h200-completion-stream.txt"), http.StatusOK)
	res := newClient(5*time.Second).complete(context.Background(), ts.URL, []byte(`{}`))
	if res.err != nil {
		t.Fatal(res.err)
	}
	const text = "\n    return f.rep.is_real_real\n\n\ndef"
	if res.text != text || res.pieces != 16 || res.tokens != 16 || res.tokensFrom != "predicted_n" {
		t.Errorf("text %q pieces %d tokens %d (%s); want %q, 16, 16 (predicted_n)", res.text, res.pieces, res.tokens, res.tokensFrom, text)
	}
	if res.draftN != 32 || res.draftAcc != 8 || res.draftRounds != 0 {
		t.Errorf("draft_n %d draft_n_accepted %d rounds %d; want 32, 8, 0", res.draftN, res.draftAcc, res.draftRounds)
	}
	if res.predictedMS != 39.637 || res.predictedPerS != 403.6632439387441 {
		t.Errorf("predicted_ms %v predicted_per_second %v", res.predictedMS, res.predictedPerS)
	}
	if len(res.pieceEnds) != 16 || int(res.pieceEnds[15]) != len(text) {
		t.Errorf("piece ends %v", res.pieceEnds)
	}
}

// The real /metrics before any request and after four drafted 16-token
// requests (copies of engine/testdata/h200/metrics*.txt): 7 verify steps
// per request, accepted tokens by draft position sized to n_max 5.
func TestParseMetricsH200(t *testing.T) {
	before, err := parseMetrics(strings.NewReader(string(golden(t, "h200-metrics.txt"))))
	if err != nil || !before.hasDrafts || before.drafts != 0 || before.acceptedPos != nil {
		t.Fatalf("before: %+v, %v", before, err)
	}
	after, err := parseMetrics(strings.NewReader(string(golden(t, "h200-metrics-after.txt"))))
	if err != nil {
		t.Fatal(err)
	}
	drafts, byPos, ok := after.delta(before)
	if !ok || drafts != 28 || !slices.Equal(byPos, []int{24, 8, 0, 0, 0}) {
		t.Errorf("delta = %d, %v, %v; want 28, [24 8 0 0 0]", drafts, byPos, ok)
	}
}

// h200Record reads a committed H200 record (docs/benchmark_results) and
// re-analyses it from its raw runs.
func h200Record(t *testing.T, quant, pair string) *record.Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "benchmark_results", "h200-llamacpp-d32676d-"+quant+"-pair"+pair+"-2026-11-30.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec record.Record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	Analyze(&rec)
	return &rec
}

// Two H200 records measured width 4 twice, as the default arm and as a
// width arm, and named the default arm's median as the width-4 runner-up's
// figure. The representative arm of a width is its explicit width arm.
func TestRunnerUpFigureIsTheWidthArms(t *testing.T) {
	for _, c := range []struct{ quant, pair, want string }{
		{"q4_0", "1234", "runner-up width 4 at 548.4"},   // the default arm ran 550.1
		{"q4_k_m", "1234", "runner-up width 2 at 399.2"}, // the default arm (width 4) ran 402.4
	} {
		rec := h200Record(t, c.quant, c.pair)
		if !strings.Contains(rec.Verdict.Why, c.want) {
			t.Errorf("%s pair %s: %s", c.quant, c.pair, rec.Verdict.Why)
		}
	}
}

// Every H200 record's round 1 was cold: 37-49 ms to the first token against
// 5-7 ms later, with one warm-up per server.
func TestFirstRoundColdOnH200Records(t *testing.T) {
	for _, q := range []string{"q8_0", "q4_0", "q4_k_m", "f16"} {
		for _, p := range []string{"1234", "4321"} {
			fr := h200Record(t, q, p).FirstRound
			if fr == nil || !fr.Cold || fr.TTFTMS < 35 || fr.TTFTMS > 55 || fr.LaterTTFTMS > 8 {
				t.Errorf("%s pair %s: %+v", q, p, fr)
			}
		}
	}
}

// The single-record verdict falls back to the next-ranked width when the
// best does not beat the default with probability >= 0.95: F16 pair 1234's
// best, width 5, beats the default with probability 0.94 only.
func TestVerdictEntryWidthFallsBack(t *testing.T) {
	rec := h200Record(t, "q8_0", "1234")
	v := rec.Verdict
	if v.Best != 5 || v.EntryWidth != 5 || !v.EarnsEntry || !strings.Contains(v.Entry, "width = 5\n") {
		t.Errorf("q8_0 pair 1234: best %d entry width %d earns %v", v.Best, v.EntryWidth, v.EarnsEntry)
	}
	rec = h200Record(t, "f16", "1234")
	v = rec.Verdict
	if v.Best != 5 || v.EarnsEntry || v.EntryWidth != 0 || !strings.Contains(v.NoEntryReason, "with probability >= 0.95") {
		t.Errorf("f16 pair 1234: best %d entry width %d earns %v (%s)", v.Best, v.EntryWidth, v.EarnsEntry, v.NoEntryReason)
	}
	if !strings.Contains(v.Why, "width 5 beats the default (width 4) with probability 0.940, below 0.95") {
		t.Errorf("why: %s", v.Why)
	}
}
