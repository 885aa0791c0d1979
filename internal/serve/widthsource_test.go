package serve

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/instance"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/metrics"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/supervise"
	"github.com/speclaunch/speclaunch/internal/width"
)

// TestWidthSourceOneWord: speclaunch_width's source label is the status
// page's width_source, as docs/serving.md says; at a schedule's bucket of
// width 1 the metric said the schedule's source (override) while the
// status said off.
func TestWidthSourceOneWord(t *testing.T) {
	sched, err := schedule.Parse("1:5,2-3:3,4+:1", string(width.Override))
	if err != nil {
		t.Fatal(err)
	}
	scheduled := width.Resolution{Source: width.Override, Reason: "operator override", Schedule: sched}
	for _, tc := range []struct {
		name string
		r    width.Resolution
		want string
	}{
		{"a width", width.Resolution{Source: width.Measured, Width: 4}, "measured"},
		{"a schedule's bucket of width 3", scheduled.AtLoad(2), "override"},
		{"a schedule's bucket of width 1", scheduled.AtLoad(4), "off"},
		{"the adaptive loop's classic", width.AdaptedTo(1, "classic is faster", key.Key{}), "off"},
		{"no drafter", width.Resolution{Source: width.Off}, "off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &plan.Plan{Resolution: tc.r}
			sv := &launcher{st: newServeStatus(p), log: slog.New(slog.NewTextHandler(io.Discard, nil)), met: metrics.New(metrics.Sources{})}
			sv.force.take(p, nil)
			in := &server.Instance{Plan: p, Proc: &supervise.Process{}, Info: &instance.Engine{}}
			sv.st.serving(in)
			sv.publishServing(in, p)
			rec := httptest.NewRecorder()
			sv.st.handler(sv).ServeHTTP(rec, httptest.NewRequest("GET", "/speclaunch/status", nil))
			var out struct {
				Engine struct {
					WidthSource string `json:"width_source"`
				}
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			if out.Engine.WidthSource != tc.want {
				t.Errorf("status width_source %q, want %q", out.Engine.WidthSource, tc.want)
			}
			if m := string(sv.met.Text()); !strings.Contains(m, `speclaunch_width{bucket=`) || !strings.Contains(m, `,source="`+tc.want+`"}`) {
				t.Errorf("speclaunch_width's source is not the status's %q:\n%s", tc.want, m)
			}
		})
	}
}
