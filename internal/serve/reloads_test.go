package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/metrics"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/watch"
)

func TestReloadRecord(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	upper := strings.ToUpper
	for _, tc := range []struct {
		name string
		ch   watch.Change
		err  error
		want lastReload
	}{
		{"a write applied", watch.Change{Path: "/etc/sl/p.toml", Reason: "write"}, nil,
			lastReload{At: now, Result: "applied", File: "/etc/sl/p.toml", Why: "write"}},
		{"a write rejected, its error masked", watch.Change{Path: "/etc/sl/p.toml", Reason: "rename-over"}, errors.New("bad"),
			lastReload{At: now, Result: "rejected", File: "/etc/sl/p.toml", Why: "rename-over", Error: "BAD"}},
		{"SIGHUP names every watched file", watch.Change{Reason: "SIGHUP"}, nil,
			lastReload{At: now, Result: "applied", File: "/etc/sl/p.toml, /etc/sl/policy.toml", Why: "SIGHUP"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := reloadRecord(now, tc.ch, []string{"/etc/sl/p.toml", "/etc/sl/policy.toml"}, tc.err, upper); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A rejected reload shows on /speclaunch/status (last_reload, its error
// with the secret masked) and in speclaunch_reloads_total, not only in the
// log: an edited ConfigMap that fails is seen by whoever watches those.
func TestRejectedReloadIsShown(t *testing.T) {
	sv := &launcher{c: Config{Secrets: &secret.Redactor{}}, st: newServeStatus(&plan.Plan{}), met: metrics.New(metrics.Sources{})}
	sv.c.Secrets.Add("sk-live-123456")
	status := func() map[string]any {
		rec := httptest.NewRecorder()
		sv.st.handler(sv).ServeHTTP(rec, httptest.NewRequest("GET", "/speclaunch/status", nil))
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if v, ok := status()["last_reload"]; !ok || v != nil {
		t.Errorf("before any reload last_reload is %v (present %v), want null", v, ok)
	}
	sv.reloaded(watch.Change{Path: "/etc/sl/p.toml", Reason: "write"}, errors.New("profile /etc/sl/p.toml:3: api_key sk-live-123456: want a string"))
	lr, _ := status()["last_reload"].(map[string]any)
	if lr["result"] != "rejected" || lr["file"] != "/etc/sl/p.toml" || !strings.Contains(lr["error"].(string), "p.toml:3") || strings.Contains(lr["error"].(string), "sk-live-123456") || lr["time"] == "" {
		t.Errorf("last_reload %v, want rejected, naming the file and its error with the secret masked", lr)
	}
	if !strings.Contains(string(sv.met.Text()), `speclaunch_reloads_total{outcome="rejected"} 1`) {
		t.Errorf("the rejected reload is not counted:\n%s", sv.met.Text())
	}
	sv.reloaded(watch.Change{Path: "/etc/sl/p.toml", Reason: "write"}, nil)
	if lr, _ := status()["last_reload"].(map[string]any); lr["result"] != "applied" || lr["error"] != nil {
		t.Errorf("after a reload that applied, last_reload is %v", lr)
	}
}

// A reload's outcome is the runtime's reply: a new engine that fails to
// start is a rejection (it read "applied" while the old settings served
// on), a superseded, dropped or stopped one records nothing, and an outcome that
// comes after a later reload began leaves that one's record shown.
func TestReloadOutcomeIsTheSwitchs(t *testing.T) {
	sv := &launcher{c: Config{Secrets: &secret.Redactor{}}, st: newServeStatus(&plan.Plan{}), met: metrics.New(metrics.Sources{})}
	result := func() string {
		sv.st.mu.Lock()
		defer sv.st.mu.Unlock()
		return sv.st.reload.Result
	}
	count := func(outcome string) bool {
		return strings.Contains(string(sv.met.Text()), `speclaunch_reloads_total{outcome="`+outcome+`"} 1`)
	}
	ch := watch.Change{Path: "/etc/sl/p.toml", Reason: "write"}
	done := sv.reloading(ch)
	if r := result(); r != "switching" {
		t.Errorf("while the switch runs: %q, want switching", r)
	}
	done(errors.New("engine exited with code 1 before it was ready"))
	if r := result(); r != "rejected" || !count("rejected") {
		t.Errorf("a new engine that failed: %q, want rejected and counted\n%s", r, sv.met.Text())
	}
	sv.reloading(ch)(server.ErrSuperseded)
	if r := result(); r != "superseded" || count("applied") {
		t.Errorf("superseded by a follow or adaptive switch: %q, want superseded, nothing counted", r)
	}
	sv.reloading(ch)(server.ErrWithdrawn)
	if r := result(); r != "superseded" || count("applied") || !count("rejected") {
		t.Errorf("dropped while it waited, by a later reload rejected: %q, want superseded, nothing counted (that reload counts its rejection)\n%s", r, sv.met.Text())
	}
	sup := sv.reloading(ch)
	sv.reloading(ch)
	sup(server.ErrSuperseded)
	if r := result(); r != "switching" {
		t.Errorf("superseded by a later reload: %q, want that one's record", r)
	}
	first := sv.reloading(ch)
	second := sv.reloading(ch)
	first(nil)
	if r := result(); r != "switching" || !count("applied") {
		t.Errorf("an outcome after a later reload began: %q, want that one's record shown, the outcome counted", r)
	}
	second(nil)
	if r := result(); r != "applied" {
		t.Errorf("the last reload applied: %q", r)
	}
}

// A reload cut short by the stop (a SIGHUP after SIGTERM) is no rejection:
// it logged "reload rejected … context canceled" and counted one.
func TestReloadCutByStopIsNoRejection(t *testing.T) {
	sv := &launcher{c: Config{Loader: canceledLoader{}, Secrets: &secret.Redactor{}}, st: newServeStatus(&plan.Plan{}), met: metrics.New(metrics.Sources{}), log: slog.New(slog.DiscardHandler)}
	ch := watch.Change{Reason: watch.ReasonSIGHUP}
	_, _, _, err := sv.reload(&plan.Plan{}, ch)
	sv.reloaded(ch, err)
	if strings.Contains(string(sv.met.Text()), `outcome="rejected"} 1`) || sv.st.reload != nil {
		t.Errorf("a reload the stop cut short was recorded (%v):\n%s", err, sv.met.Text())
	}
}

type canceledLoader struct{}

func (canceledLoader) Load() (Load, error) {
	return nil, fmt.Errorf("read profile p.toml: %w", context.Canceled)
}
