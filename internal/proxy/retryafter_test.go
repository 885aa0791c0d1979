package proxy

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/testenv"
)

// A held request's 503 says to come back after a tenth of the hold
// timeout, 1 to 30 s (1 at once while stopping), and docs/serving.md says
// that rule and shows it in its example. The doc showed Retry-After: 12
// without the rule, and an operator with a short hold timeout, seeing 1,
// read the code as wrong.
func TestRetryAfterIsTheDocumentedRule(t *testing.T) {
	for _, c := range []struct {
		hold     time.Duration
		stopping bool
		want     int
	}{
		{2 * time.Minute, false, 12}, {5 * time.Second, false, 1}, {19 * time.Second, false, 1},
		{20 * time.Second, false, 2}, {5 * time.Minute, false, 30}, {time.Hour, false, 30},
		{2 * time.Minute, true, 1},
	} {
		if got := retryAfter(c.hold, c.stopping); got != c.want {
			t.Errorf("hold %s, stopping %v: Retry-After %d, want %d", c.hold, c.stopping, got, c.want)
		}
	}
	// Through the proxy: a full queue under the default hold timeout.
	p := New(Options{QueueSize: 1})
	u := front(t, p)
	// p.Close answers the held request, before the server closes.
	t.Cleanup(func() { p.Close(Cause{}) })
	go http.Get(u + "/v1/models") // takes the one place
	testenv.WaitFor(t, "one request held", func() bool { return p.Stats().HeldNow == 1 })
	resp, err := http.Get(u + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Retry-After"); resp.StatusCode != 503 || got != "12" {
		t.Errorf("a full queue at the default hold timeout: %d, Retry-After %q, want 503 and 12", resp.StatusCode, got)
	}

	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "serving.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(doc)), " ")
	rule := fmt.Sprintf("Its `Retry-After` is a tenth of `server.hold_timeout` in whole seconds, at least %d and at most %d", retryAfterMin, retryAfterMax)
	if retryAfterPart != 10 || !strings.Contains(text, rule) {
		t.Errorf("docs/serving.md should say the rule: %q", rule)
	}
	m := regexp.MustCompile("(?s)Retry-After: (\\d+)\\s.{0,200}?became ready within (\\S+) \\(server.hold_timeout\\)").FindStringSubmatch(string(doc))
	if m == nil {
		t.Fatal("docs/serving.md: the held request's example (Retry-After and the hold timeout) is not found")
	}
	shown, _ := strconv.Atoi(m[1])
	hold, err := time.ParseDuration(m[2])
	if err != nil || shown != retryAfter(hold, false) {
		t.Errorf("docs/serving.md's example shows Retry-After: %d for a hold timeout of %s; the rule gives %d", shown, m[2], retryAfter(hold, false))
	}
}
