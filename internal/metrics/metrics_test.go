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
	var counted []string
	for _, c := range fams["speclaunch_switches_total"].GetMetric() {
		if c.GetCounter().GetValue() != 0 {
			l := c.GetLabel()
			counted = append(counted, l[0].GetValue()+"/"+l[1].GetValue()+"/"+l[2].GetValue())
		}
	}
	if len(counted) != 1 || counted[0] != "adapt/overlap/failed" {
		t.Errorf("switches counted %v, want adapt/overlap/failed", counted)
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

// Issue 33: the switch series did not exist until the first switch, so a
// rate() or an alert on them had nothing to read. They start at zero.
func TestSwitchSeriesAtZero(t *testing.T) {
	m := New(Sources{})
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(m.Text()))
	if err != nil {
		t.Fatal(err)
	}
	sw := fams["speclaunch_switches_total"].GetMetric()
	if want := len(SwitchKinds) * len(SwitchModes) * 2; len(sw) != want {
		t.Errorf("%d switch counters before any switch, want %d at zero", len(sw), want)
	}
	for _, c := range sw {
		if c.GetCounter().GetValue() != 0 {
			t.Errorf("counter %v is not 0", c)
		}
	}
	if h := fams["speclaunch_switch_duration_seconds"].GetMetric(); len(h) != len(SwitchKinds)*len(SwitchModes) || h[0].GetHistogram().GetSampleCount() != 0 {
		t.Errorf("switch durations before any switch: %v", h)
	}
	if fams["speclaunch_engine_restarts_total"] == nil {
		t.Error("no restarts counter at zero")
	}
}

// Every reload outcome is a series at zero from the start (an alert on
// rejected reloads works before the first), and a reload counts under its
// own.
func TestReloadsCounted(t *testing.T) {
	m := New(Sources{})
	count := func() map[string]float64 {
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(bytes.NewReader(m.Text()))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, c := range fams["speclaunch_reloads_total"].GetMetric() {
			got[c.GetLabel()[0].GetName()+"="+c.GetLabel()[0].GetValue()] = c.GetCounter().GetValue()
		}
		return got
	}
	if got := count(); len(got) != 2 || got["outcome=applied"] != 0 || got["outcome=rejected"] != 0 {
		t.Errorf("at the start: %v, want applied and rejected at 0", got)
	}
	m.Reloaded("rejected")
	m.Reloaded("rejected")
	m.Reloaded("applied")
	if got := count(); got["outcome=applied"] != 1 || got["outcome=rejected"] != 2 {
		t.Errorf("after 1 applied and 2 rejected: %v", got)
	}
}
