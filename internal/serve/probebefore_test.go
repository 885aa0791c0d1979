package serve

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/adapt"
	"github.com/speclaunch/speclaunch/internal/control"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// Only the first engine of a pair is probed before traffic, while the
// controller has no verify cost: a later one (the engine of a reload saved
// during the first's probe) is not, though that probe was cut short.
func TestProbeBefore(t *testing.T) {
	for _, c := range []struct {
		name     string
		hasCurve bool
		tried    map[string]bool
		pair     string
		want     bool
	}{
		{"first engine, nothing known", false, nil, "t\x00d", true},
		{"a verify cost known", true, nil, "t\x00d", false},
		{"the pair's engine was probed (cut short)", false, map[string]bool{"t\x00d": true}, "t\x00d", false},
		{"another pair's engine was probed", false, map[string]bool{"t\x00d": true}, "t2\x00d", true},
	} {
		if got := probeBefore(c.hasCurve, c.tried, c.pair); got != c.want {
			t.Errorf("%s: probeBefore = %v, want %v", c.name, got, c.want)
		}
	}
}

// A replacement engine of a pair whose first engine's probe before
// traffic was cut short gets no second one (an edit saved during the
// first waited 8.5 s for it, then 10 s more for the second); an engine of
// another pair does, and its line says the old engine serves meanwhile,
// not that requests wait.
func TestProbeBeforeTrafficOncePerPair(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/props" { // each engine's slots are read; only the probe counts
			hits.Add(1)
		}
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer srv.Close()
	var log bytes.Buffer
	sh := &controlShell{c: control.New(control.Config{Default: schedule.Flat(4, "engine default")}), client: srv.Client(), log: slog.New(slog.NewTextHandler(&log, nil))}
	cut, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sh.BeforeTraffic(cut, adapt.Target{BaseURL: srv.URL, Gen: 1, Pair: "t\x00d"}, true); err != nil {
		t.Fatal(err)
	}
	if l := log.String(); !strings.Contains(l, "requests wait meanwhile") {
		t.Fatalf("the first engine's probe unsaid:\n%s", l)
	}
	log.Reset()
	if err := sh.BeforeTraffic(context.Background(), adapt.Target{BaseURL: srv.URL, Gen: 2, Pair: "t\x00d"}, false); err != nil {
		t.Fatal(err)
	}
	if n := hits.Load(); n != 0 || log.Len() != 0 {
		t.Errorf("the replacement engine was probed before traffic again (%d requests):\n%s", n, log.String())
	}
	if err := sh.BeforeTraffic(cut, adapt.Target{BaseURL: srv.URL, Gen: 3, Pair: "t2\x00d"}, false); err != nil {
		t.Fatal(err)
	}
	if l := log.String(); !strings.Contains(l, "at most 10s; the engine it replaces serves meanwhile") || strings.Contains(l, "requests wait") {
		t.Errorf("another pair's engine, the old one serving:\n%s", l)
	}
}

// A switch asked for during a probe before traffic names the probe, its
// bound and the time left: the runtime's own line said only "an engine is
// starting; the new settings apply after it".
func TestPreLine(t *testing.T) {
	began := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		name string
		p    *preRun
		at   time.Duration
		want string
	}{
		{"none", nil, 0, ""},
		{"under way", &preRun{engine: 1, began: began}, 1500 * time.Millisecond, "the new settings wait for engine 1's verify-cost probe before it takes traffic (at most 10s, 8.5s left), then apply"},
		{"past its bound", &preRun{engine: 2, began: began}, 12 * time.Second, "the new settings wait for engine 2's verify-cost probe before it takes traffic (at most 10s, 0s left), then apply"},
	} {
		if got := preLine(c.p, began.Add(c.at)); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
