package serve

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/control"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/server"
)

// A probe's early end is told by what ended it, not always as a timeout.
func TestProbeStopped(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		switched, timedOut, stopped bool
		want                        string
	}{
		{"a switch cut it", true, false, false, "cut by a switch of the serving engine (EOF)"},
		{"a switch began and the bound ran out", true, true, false, "cut by a switch of the serving engine (EOF)"},
		{"the bound ran out", false, true, false, "timed out: it did not finish within 30s"},
		{"serve stops", false, false, true, "serve is stopping"},
		{"the engine answered an error", false, false, false, "failed: EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := probeStopped(io.EOF, 30*time.Second, tc.switched, tc.timedOut, tc.stopped); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// A probe that a switch cuts (the engine's connection closes: EOF) is
// said to be cut by the switch, and the shell does not log it itself:
// the controller says it once.
func TestProbeCutBySwitch(t *testing.T) {
	var sh *controlShell
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sh.switches.Add(1) // a switch begins and stops the engine under the probe
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	defer srv.Close()
	b, err := proxy.NewBackend(srv.URL, "engine 1")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	sh = &controlShell{eng: fakeEngines{cur: &server.Instance{ID: 1, Backend: b, Plan: &plan.Plan{}}},
		client: srv.Client(), log: slog.New(slog.NewTextHandler(&logs, nil))}
	obs := make(chan control.Observation, 1)
	sh.probe(context.Background(), control.Action{Op: control.Probe, Rows: []int{1, 2}, Reason: "test"}, obs)
	o := <-obs
	if !strings.HasPrefix(o.Err, "cut by a switch of the serving engine") {
		t.Errorf("the probe's end is %q, want it cut by the switch", o.Err)
	}
	if n := strings.Count(logs.String(), "adapt:"); n != 1 || !strings.Contains(logs.String(), "adapt: probing") {
		t.Errorf("the shell logged %d adapt lines, want only the probe's start (the controller says how it ended):\n%s", n, logs.String())
	}
}

// swapEngines is a runtime whose serving engine a test replaces.
type swapEngines struct {
	cur atomic.Pointer[server.Instance]
}

func (s *swapEngines) Current() *server.Instance { return s.cur.Load() }
func (s *swapEngines) Beside() int               { return 0 }

// A switch that leaves the probed engine running (draining, as on the
// H100, where it answered the probe for 5 s beside the new engine) still
// ends the probe, said as cut by the switch, and the probe's request on
// the old engine is cancelled.
func TestProbeEndsWhenItsEngineIsReplaced(t *testing.T) {
	arrived, cancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // the engine drains: it answers nothing until the request goes
		case arrived <- struct{}{}:
		default:
		}
		<-r.Context().Done()
		select {
		case cancelled <- struct{}{}:
		default:
		}
	}))
	defer srv.Close()
	b, err := proxy.NewBackend(srv.URL, "engine 1")
	if err != nil {
		t.Fatal(err)
	}
	eng := &swapEngines{}
	eng.cur.Store(&server.Instance{ID: 1, Backend: b, Plan: &plan.Plan{}})
	sh := &controlShell{eng: eng, client: srv.Client(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	obs := make(chan control.Observation, 1)
	go sh.probe(context.Background(), control.Action{Op: control.Probe, Rows: []int{19, 37}, Reason: "test"}, obs)
	<-arrived
	eng.cur.Store(&server.Instance{ID: 2, Backend: b, Plan: &plan.Plan{}}) // the switch: engine 2 serves
	select {
	case o := <-obs:
		if !strings.HasPrefix(o.Err, "cut by a switch of the serving engine") {
			t.Errorf("the probe's end is %q, want it cut by the switch", o.Err)
		}
	case <-time.After(probeBound / 2):
		t.Fatalf("the probe of a replaced engine went on past %s", probeBound/2)
	}
	<-cancelled
	if !sh.probed.Load() {
		t.Error("the probe left no mark for the next scrape: its rate would count as the width's")
	}
}
