// Package metrics holds speclaunch's own Prometheus series: what the
// launcher does (switches, held and refused requests, the serving width,
// the adaptive loop), beside the engine's series on /metrics. They are
// written by the Prometheus Go client, not by hand.
package metrics

import (
	"bytes"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// Sources are read at scrape time (the proxy's counters, the serving
// engine); each may be nil.
type Sources struct {
	InFlight func() float64 // requests in flight on the serving engine
	HeldNow  func() float64 // requests waiting for an engine
	Held     func() float64 // requests ever held
	Rejected func() float64 // 503s: queue full, held too long, stopping, out of resources, connections past the cap
	Retried  func() float64 // requests sent again to the next engine
}

// Metrics is speclaunch's registry.
type Metrics struct {
	reg        *prometheus.Registry
	switches   *prometheus.CounterVec
	switchTime *prometheus.HistogramVec
	restarts   prometheus.Counter
	width      *prometheus.GaugeVec
	widthLoad  prometheus.Gauge
	verified   prometheus.Gauge
	phase      *prometheus.GaugeVec
	adaptState *prometheus.GaugeVec
	predErr    prometheus.Gauge
	reloads    *prometheus.CounterVec
}

// Phases are the runtime's states (server.Phase names).
var Phases = []string{"starting", "serving", "switching", "stopping", "stopped"}

// SwitchKinds and SwitchModes label the switch series (server.Kind and
// key.Switch names, "start" aside: a launch is not a switch).
var (
	SwitchKinds = []string{"reload", "adapt", "restart", "follow"}
	SwitchModes = []string{"overlap", "drain", "direct", "alone"}
)

// The outcomes of a reload, as speclaunch_reloads_total and the status
// page say them: applied (its settings were taken) or rejected (the
// engine kept the previous ones).
const (
	ReloadApplied  = "applied"
	ReloadRejected = "rejected"
)

// ReloadResults label speclaunch_reloads_total by outcome.
var ReloadResults = []string{ReloadApplied, ReloadRejected}

// AdaptStates are the adaptive width's states: control.Status.State's
// (watching, switching, trial, holding), adapt.StateNotAdapting, and off
// when it does not run. The loop before internal/control also had
// probing, exploring and stopped; nothing sets them now.
var AdaptStates = []string{"off", "watching", "switching", "trial", "holding", "not adapting"}

// New registers every series.
func New(src Sources) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := func(name, help string, fn func() float64, counter bool) {
		if fn == nil {
			return
		}
		if counter {
			m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn))
			return
		}
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
	}
	f("speclaunch_requests_in_flight", "Requests in flight on the serving engine, of every route, the launcher's own included (the load a schedule follows counts generations alone).", src.InFlight, false)
	f("speclaunch_requests_held", "Requests waiting for an engine (a drain switch, a restart).", src.HeldNow, false)
	f("speclaunch_requests_held_total", "Requests that waited for an engine.", src.Held, true)
	f("speclaunch_requests_rejected_total", "Requests answered 503 by speclaunch: queue full, held too long, stopping, out of resources, or client connections past the cap.", src.Rejected, true)
	f("speclaunch_requests_retried_total", "Requests sent again to the next engine (their engine died before answering).", src.Retried, true)
	m.switches = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "speclaunch_switches_total",
		Help: "Engine switches by kind (reload, adapt, restart, follow), mode (overlap, drain, direct; alone when nothing served) and outcome (ok, failed)."}, []string{"kind", "mode", "outcome"})
	m.switchTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "speclaunch_switch_duration_seconds",
		Help:    "From the switch's start to the new engine serving (or failing), as the status's took_ms; a wait behind another switch (waited_ms) is not in it.",
		Buckets: []float64{0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}}, []string{"kind", "mode"})
	m.restarts = prometheus.NewCounter(prometheus.CounterOpts{Name: "speclaunch_engine_restarts_total",
		Help: "Engines that exited or hung while serving and were restarted."})
	m.width = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "speclaunch_width",
		Help: "The serving engine's draft width (verify rows; 1 = speculation off), labelled by where it came from and the schedule's bucket in force (requests in flight: 1, 2-3, 4+)."}, []string{"source", "bucket"})
	m.widthLoad = prometheus.NewGauge(prometheus.GaugeOpts{Name: "speclaunch_width_load",
		Help: "The load (mean generation requests in flight) the serving width was chosen for: 1 at a launch, the load that caused the last switch of a followed schedule."})
	m.verified = prometheus.NewGauge(prometheus.GaugeOpts{Name: "speclaunch_width_verified",
		Help: "1 when the serving engine's width was read from the engine and matches, or is 1 (speculation off: the engine runs with no drafter), else 0."})
	m.phase = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "speclaunch_state",
		Help: "The serve runtime's state: 1 for the current one."}, []string{"state"})
	m.adaptState = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "speclaunch_adapt_state",
		Help: "The adaptive width loop's state: 1 for the current one."}, []string{"state"})
	m.predErr = prometheus.NewGauge(prometheus.GaugeOpts{Name: "speclaunch_adapt_prediction_error_ratio",
		Help: "The adaptive loop's prediction error at its latest judged trial: the trial width's measured rate / the model's predicted rate - 1 (below 0: the model was too hopeful; 0 until a trial is judged)."})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "speclaunch_reloads_total",
		Help: "Reloads of the profile and policy files by outcome: applied (the settings were taken), rejected (the engine kept the previous ones)."}, []string{"outcome"})
	m.reg.MustRegister(m.switches, m.switchTime, m.restarts, m.width, m.widthLoad, m.verified, m.phase, m.adaptState, m.predErr, m.reloads)
	// Every switch series exists at zero from the start, as Prometheus
	// conventions want: rate() and alerts on them work before the first
	// switch (issue 33).
	for _, kind := range SwitchKinds {
		for _, mode := range SwitchModes {
			m.switchTime.WithLabelValues(kind, mode)
			for _, outcome := range []string{"ok", "failed"} {
				m.switches.WithLabelValues(kind, mode, outcome)
			}
		}
	}
	for _, r := range ReloadResults {
		m.reloads.WithLabelValues(r)
	}
	m.Phase("starting")
	m.Adapt("off")
	return m
}

// Switched counts one finished switch.
func (m *Metrics) Switched(kind, mode string, ok bool, took time.Duration) {
	outcome := "ok"
	if !ok {
		outcome = "failed"
	}
	m.switches.WithLabelValues(kind, mode, outcome).Inc()
	m.switchTime.WithLabelValues(kind, mode).Observe(took.Seconds())
	if kind == "restart" && ok {
		m.restarts.Inc()
	}
}

// Reloaded counts one reload by its result (ReloadResults).
func (m *Metrics) Reloaded(result string) { m.reloads.WithLabelValues(result).Inc() }

// Serving sets the serving engine's width, its source and whether it is
// verified, at a launch's load (one request, every bucket of a flat
// schedule).
func (m *Metrics) Serving(width int, source string, verified bool) {
	m.ServingAt(width, source, "1+", 1, verified)
}

// ServingAt is Serving for the bucket of a schedule in force ("4+") and
// the load it was chosen for.
func (m *Metrics) ServingAt(width int, source, bucket string, load float64, verified bool) {
	m.width.Reset()
	m.width.WithLabelValues(source, bucket).Set(float64(width))
	m.widthLoad.Set(load)
	v := 0.0
	if verified {
		v = 1
	}
	m.verified.Set(v)
}

// Phase sets the runtime's state.
func (m *Metrics) Phase(state string) { oneHot(m.phase, Phases, state) }

// Adapt sets the adaptive loop's state.
func (m *Metrics) Adapt(state string) { oneHot(m.adaptState, AdaptStates, state) }

// PredictionError sets the adaptive loop's prediction error at its latest
// judged trial (control.Status.PredictionError).
func (m *Metrics) PredictionError(ratio float64) { m.predErr.Set(ratio) }

func oneHot(g *prometheus.GaugeVec, all []string, cur string) {
	for _, s := range all {
		v := 0.0
		if s == cur {
			v = 1
		}
		g.WithLabelValues(s).Set(v)
	}
}

// Text is every series in the Prometheus text format, as /metrics serves
// it.
func (m *Metrics) Text() []byte {
	mfs, err := m.reg.Gather()
	var b bytes.Buffer
	if err != nil {
		return nil
	}
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if enc.Encode(mf) != nil {
			return nil
		}
	}
	return b.Bytes()
}
