package proxy

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// GET /metrics waits on the engine's series for MetricsTimeout at most,
// then answers speclaunch's with a comment saying why the engine's are
// missing. Before, a hung engine (SIGSTOP) held the scrape for 10 s,
// Prometheus' default scrape_timeout, and the answer said nothing of it.
func TestMetricsOfTheEngine(t *testing.T) {
	const own = "speclaunch_up 1\n"
	hung := make(chan struct{})
	t.Cleanup(func() { close(hung) }) // before the engine's server closes
	// hang answers nothing until the test ends (an engine under SIGSTOP).
	hang := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hung:
		case <-r.Context().Done():
		}
	}
	notSupported := func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not supported", http.StatusNotImplemented)
	}
	cases := []struct {
		name   string
		engine http.HandlerFunc // nil: none serves
		want   string
	}{
		{"answers", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "llamacpp:requests_processing 2") },
			"llamacpp:requests_processing 2\n" + own},
		{"hung", hang,
			"# speclaunch: the engine's series are missing: its /metrics did not answer within 20ms\n" + own},
		{"no metrics", notSupported,
			"# speclaunch: the engine's series are missing: its /metrics answered HTTP 501\n" + own},
		{"none serves", nil,
			"# speclaunch: the engine's series are missing: no engine serves now\n" + own},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New(Options{Metrics: func() []byte { return []byte(own) }, MetricsTimeout: 20 * time.Millisecond})
			if c.engine != nil {
				p.Route(backend(t, c.engine))
			}
			c2 := &http.Client{Timeout: 5 * time.Second} // a bound to give up, not a judge of speed
			resp, err := c2.Get(front(t, p) + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || string(body) != c.want {
				t.Errorf("%d %q, want 200 %q", resp.StatusCode, body, c.want)
			}
		})
	}
}

// seriesMissing is the one rule for why the engine's series are missing.
func TestSeriesMissing(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:40121: connect: connection refused")
	cases := []struct {
		name     string
		err      error
		timedOut bool
		status   int
		want     string
	}{
		{"there", nil, false, 200, ""},
		{"timed out, no answer", errors.New("context deadline exceeded"), true, 0, "its /metrics did not answer within 3s"},
		{"timed out in the body", errors.New("context deadline exceeded"), true, 200, "its /metrics did not answer within 3s"},
		{"refused", refused, false, 0, "its /metrics failed: " + refused.Error()},
		{"not found", nil, false, 404, "its /metrics answered HTTP 404"},
	}
	for _, c := range cases {
		if got := seriesMissing(c.err, c.timedOut, c.status, DefaultMetricsTimeout); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := string(missingLine("a\nb")); got != "# speclaunch: the engine's series are missing: a b\n" || strings.Count(got, "\n") != 1 {
		t.Errorf("missingLine: %q: want one comment line", got)
	}
}
