package bench

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
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
