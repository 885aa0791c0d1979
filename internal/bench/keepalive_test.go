package bench

import (
	"context"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/fakellama"
)

// Back-to-back measured requests to an engine that closes each connection
// shortly after its streamed answer, while advertising keep-alive (what
// llama-server d32676d did, docs/engines.md), all succeed: the bench client
// never sends a request on a connection the engine is about to close.
func TestClientEngineClosingAfterEachStream(t *testing.T) {
	u, stop, err := fakellama.ClosingServer([]string{
		`data: {"content":"a","stop":false}` + "\n\n",
		`data: {"content":"","stop":true,"tokens_predicted":1,"timings":{"predicted_n":1,"predicted_ms":1}}` + "\n\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c := newClient(10 * time.Second)
	failed := 0
	for i := range 40 {
		if res := c.complete(context.Background(), u, []byte(`{"stream":true}`)); res.err != nil {
			failed++
			t.Logf("request %d: %v", i, res.err)
		}
	}
	if failed > 0 {
		t.Errorf("%d of 40 requests failed", failed)
	}
}
