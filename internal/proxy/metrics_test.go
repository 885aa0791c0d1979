package proxy

import (
	"compress/gzip"
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
	// scraped answers as an engine that honours a scraper's headers does:
	// gzip when asked, OpenMetrics when asked; the key is what it needs.
	scraped := func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") != "Bearer k-1234567" && r.Header.Get("X-Api-Key") != "k-1234567":
			http.Error(w, "no key", http.StatusUnauthorized)
		case strings.Contains(r.Header.Get("Accept-Encoding"), "gzip"):
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(w)
			io.WriteString(gz, "x 1\n")
			gz.Close()
		case strings.Contains(r.Header.Get("Accept"), "openmetrics"):
			io.WriteString(w, "x 1\n# EOF\n")
		default:
			io.WriteString(w, "x 1\n")
		}
	}
	cases := []struct {
		name   string
		engine http.HandlerFunc // nil: none serves
		want   string
	}{
		{"a scraper's headers, the key alone passed on", scraped, "x 1\n" + own},
		{"the key as X-Api-Key", scraped, "x 1\n" + own},
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
			req, _ := http.NewRequest(http.MethodGet, front(t, p)+"/metrics", nil)
			req.Header.Set("Accept-Encoding", "gzip") // as Prometheus sends
			req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0,text/plain;version=0.0.4;q=0.5")
			if c.name == "the key as X-Api-Key" {
				req.Header.Set("X-Api-Key", "k-1234567")
			} else {
				req.Header.Set("Authorization", "Bearer k-1234567")
			}
			resp, err := c2.Do(req)
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
