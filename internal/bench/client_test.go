package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// replay serves a captured SSE body as llama-server streamed it.
func replay(t testing.TB, body []byte, status int) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func golden(t testing.TB, name string) []byte {
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestClientGoldenStreams(t *testing.T) {
	const full = "hous skyinsmallcnig rjb hellohouse niwater lighs"
	for _, tc := range []struct {
		file             string
		text             string
		pieces, tokens   int
		draftN, draftAcc int
		predictedMS      float64
	}{
		// NEW tree: every token streamed, draft fields in the final timings.
		{"new-spec-completion-stream.txt", full, 16, 16, 11, 11, 4.928},
		// OLD tree with a draft model: the stream drops its last 3 tokens;
		// the count comes from the final timings, not from the events.
		{"old-spec-completion-stream.txt", "hous skyinsmallcnig rjb hellohouse ni", 13, 16, 10, 10, 4.956},
		{"new-plain-completion-stream.txt", full, 16, 16, 0, 0, 0},
	} {
		t.Run(tc.file, func(t *testing.T) {
			ts := replay(t, golden(t, tc.file), http.StatusOK)
			c := newClient(5 * time.Second)
			res := c.complete(context.Background(), ts.URL, []byte(`{}`))
			if res.err != nil {
				t.Fatal(res.err)
			}
			if res.text != tc.text || res.pieces != tc.pieces || res.tokens != tc.tokens || res.tokensFrom != "predicted_n" {
				t.Errorf("text %q pieces %d tokens %d (%s)", res.text, res.pieces, res.tokens, res.tokensFrom)
			}
			if res.draftN != tc.draftN || res.draftAcc != tc.draftAcc {
				t.Errorf("draft %d/%d", res.draftAcc, res.draftN)
			}
			if tc.predictedMS != 0 && res.predictedMS != tc.predictedMS {
				t.Errorf("predicted_ms %v", res.predictedMS)
			}
			if len(res.pieceEnds) != res.pieces || int(res.pieceEnds[len(res.pieceEnds)-1]) != len(res.text) {
				t.Errorf("piece ends %v", res.pieceEnds)
			}
			if res.wall <= 0 || res.ttft <= 0 || res.ttft > res.wall {
				t.Errorf("wall %v ttft %v", res.wall, res.ttft)
			}
		})
	}
}

func TestClientFailures(t *testing.T) {
	ok := "data: {\"content\":\"a\",\"stop\":false}\n\n"
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"http 500", 500, `{"error":{"code":500,"message":"The model produced output that does not match the expected Content-only format","type":"server_error"}}`, "HTTP 500: The model produced output"},
		{"http 404 text", 404, "not found", "HTTP 404: not found"},
		{"error event mid-stream", 200, ok + `data: {"error":{"code":500,"message":"boom","type":"server_error"}}` + "\n\n", "engine error event: boom"},
		{"error string", 200, ok + `data: {"error":"bad things"}` + "\n\n", "engine error event: bad things"},
		{"no final event", 200, ok + ok, "stream ended without a final event"},
		{"no tokens", 200, `data: {"content":"","stop":true,"timings":{"predicted_n":0}}` + "\n\n", "no tokens"},
		{"malformed", 200, "data: {\"content\":\n\n", "malformed event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := replay(t, []byte(tc.body), tc.status)
			res := newClient(5*time.Second).complete(context.Background(), ts.URL, []byte(`{}`))
			if res.err == nil || !strings.Contains(res.err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", res.err, tc.want)
			}
		})
	}
}

func TestClientStalledStreamTimesOut(t *testing.T) {
	release := make(chan struct{})
	streaming := make(chan struct{}, 2) // a request's first event is sent
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "data: {\"content\":\"a\",\"stop\":false}\n\n")
		w.(http.Flusher).Flush()
		streaming <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer ts.Close()
	defer close(release)
	res := newClient(150*time.Millisecond).complete(context.Background(), ts.URL, []byte(`{}`))
	if res.err == nil || !strings.Contains(res.err.Error(), "timed out after 150ms") {
		t.Errorf("err = %v", res.err)
	}

	<-streaming // the first request's
	// Cancelled mid-stream: once the second request's first event is sent.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-streaming; cancel() }()
	res = newClient(10*time.Second).complete(ctx, ts.URL, []byte(`{}`))
	if !errors.Is(res.err, context.Canceled) {
		t.Errorf("cancelled request: err = %v, want context.Canceled", res.err)
	}
}

func TestClientSlowPathShapes(t *testing.T) {
	// Spaced JSON (a Python server), escapes and surrogate pairs, a lone
	// surrogate (the fast path declines it, encoding/json gives U+FFFD), a final
	// event with content, [DONE], tokens_predicted without timings.
	body := "data: {\"content\": \"x\", \"stop\": false}\n\n" +
		"data: {\"content\":\"\\u00e9\\n\\\"q\\\"\",\"stop\":false}\n\n" +
		"data: {\"content\":\"\\ud83d\\ude00\",\"stop\":false}\n\n" +
		"data: {\"content\":\"\\ud83d\",\"stop\":false}\n\n" +
		"data: {\"content\":\"\",\"stop\":false}\n\n" +
		"data: {\"content\":\"!\",\"stop\":true,\"tokens_predicted\":5}\n\n" +
		"data: [DONE]\n\n"
	ts := replay(t, []byte(body), 200)
	res := newClient(5*time.Second).complete(context.Background(), ts.URL, []byte(`{}`))
	if res.err != nil {
		t.Fatal(res.err)
	}
	if want := "xé\n\"q\"😀\uFFFD!"; res.text != want || res.pieces != 5 || res.tokens != 5 || res.tokensFrom != "tokens_predicted" {
		t.Errorf("text %q pieces %d tokens %d (%s)", res.text, res.pieces, res.tokens, res.tokensFrom)
	}
}

func TestParseMetrics(t *testing.T) {
	f, err := os.Open("testdata/new-spec-metrics-after.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	after, err := parseMetrics(f)
	if err != nil {
		t.Fatal(err)
	}
	before, err := parseMetrics(strings.NewReader(string(golden(t, "new-spec-metrics.txt"))))
	if err != nil {
		t.Fatal(err)
	}
	drafts, byPos, ok := after.delta(before)
	if !ok || drafts != 12 || len(byPos) != 3 || byPos[0] != 12 || byPos[1] != 12 || byPos[2] != 9 {
		t.Errorf("delta: drafts %d by position %v ok %v", drafts, byPos, ok)
	}
	none, err := parseMetrics(strings.NewReader("# nothing\nllamacpp:prompt_tokens_total 3\n"))
	if err != nil || none.hasDrafts {
		t.Errorf("a page without speculative counters: %+v %v", none, err)
	}
	if _, _, ok := none.delta(metrics{}); ok {
		t.Error("delta of a page without counters is ok")
	}
}

// BenchmarkClient measures the client's own CPU per request: a 200-token
// stream replayed from memory in llama-server's event shape.
func BenchmarkClient(b *testing.B) {
	var sb strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&sb, "data: {\"index\":0,\"content\":\" tok%d\",\"tokens\":[%d],\"stop\":false,\"id_slot\":-1,\"tokens_predicted\":%d,\"tokens_evaluated\":172}\n\n", i, 300+i, i+1)
	}
	final := golden(b, "new-spec-completion-stream.txt")
	final = final[strings.LastIndex(string(final[:len(final)-3]), "data: "):]
	sb.Write(final)
	body := []byte(sb.String())
	ts := replay(b, body, http.StatusOK)
	c := newClient(10 * time.Second)
	req := requestBody(DefaultPrompt, 200, "")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := c.complete(context.Background(), ts.URL, req)
		if res.err != nil || res.pieces != 200 {
			b.Fatalf("%v pieces %d", res.err, res.pieces)
		}
	}
}
