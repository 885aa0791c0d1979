package metrics

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The exposition parses, the state gauges are one-hot, a switch counts
// under its labels, and sources are read at scrape time.
func TestText(t *testing.T) {
	held := 0.0
	m := New(Sources{HeldNow: func() float64 { return held }})
	m.Phase("switching")
	m.Switched("adapt", "overlap", false, 2*time.Second)
	m.Serving(3, "adaptive", true)
	held = 5
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(m.Text()))
	if err != nil {
		t.Fatalf("does not parse: %v\n%s", err, m.Text())
	}
	on := 0
	for _, g := range fams["speclaunch_state"].GetMetric() {
		if g.GetGauge().GetValue() == 1 {
			on++
			if v := g.GetLabel()[0].GetValue(); v != "switching" {
				t.Errorf("state %q is on, want switching", v)
			}
		}
	}
	if on != 1 {
		t.Errorf("%d states on, want 1", on)
	}
	sw := fams["speclaunch_switches_total"].GetMetric()
	if len(sw) != 1 || sw[0].GetCounter().GetValue() != 1 || sw[0].GetLabel()[2].GetValue() != "failed" {
		t.Errorf("switches %v", sw)
	}
	if v := fams["speclaunch_requests_held"].GetMetric()[0].GetGauge().GetValue(); v != 5 {
		t.Errorf("held %v, want 5 (read at scrape time)", v)
	}
	m.ServingAt(1, "tuned", "4+", 3.9, true)
	p2 := expfmt.NewTextParser(model.UTF8Validation)
	fams, _ = p2.TextToMetricFamilies(bytes.NewReader(m.Text()))
	if w := fams["speclaunch_width"].GetMetric(); len(w) != 1 || w[0].GetGauge().GetValue() != 1 || w[0].GetLabel()[0].GetValue() != "4+" {
		t.Errorf("width %v, want 1 in bucket 4+ (one series: the last)", w)
	}
	if v := fams["speclaunch_width_load"].GetMetric()[0].GetGauge().GetValue(); v != 3.9 {
		t.Errorf("width load %v", v)
	}
	if fams["speclaunch_engine_restarts_total"].GetMetric()[0].GetCounter().GetValue() != 0 {
		t.Error("a failed adapt switch counted as a restart")
	}
}
