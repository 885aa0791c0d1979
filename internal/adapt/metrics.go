package adapt

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/speclaunch/speclaunch/internal/promtext"
)

// The llama-server /metrics families the loop reads (llama-server d32676d;
// engine/testdata/h200/metrics-after.txt is a real capture).
const (
	famCycles      = "llamacpp:spec_decode_num_drafts_total"
	famDrafted     = "llamacpp:spec_decode_num_draft_tokens_total"
	famAccepted    = "llamacpp:spec_decode_num_accepted_tokens_total"
	famPerPos      = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
	famPredicted   = "llamacpp:tokens_predicted_total"
	famPredictSecs = "llamacpp:tokens_predicted_seconds_total"
	famDecodes     = "llamacpp:n_decode_total"
	famProcessing  = "llamacpp:requests_processing"
)

// maxPositions bounds the per-position family: no engine drafts this many
// tokens, so a larger label is a malformed reply, not a width.
const maxPositions = 256

// Snapshot is one scrape of the engine's counters.
type Snapshot struct {
	Cycles   float64 // draft+verify cycles (spec_decode_num_drafts_total)
	Drafted  float64 // draft tokens proposed
	Accepted float64 // draft tokens accepted
	// PerPos[p] counts cycles that accepted the draft token at position p
	// (from 0): cycles accepting at least p+1 tokens. llama-server shows the
	// family only after the first drafted request, sized to its n_max.
	PerPos         []float64
	HasSpec        bool    // the spec_decode families are present
	HasPerPos      bool    // the per-position family is present
	Predicted      float64 // tokens generated
	PredictSeconds float64 // time generating them, summed over slots
	Decodes        float64 // llama_decode() calls
	Processing     float64 // requests being processed now (a gauge)
	// Served, Ended: Target.Served at the scrape, for ServedSlots slots,
	// when HasServed.
	Served, Ended float64
	ServedSlots   int
	HasServed     bool
}

// ParseMetrics reads a /metrics body. Lines it does not read are skipped;
// a malformed line is an error naming it, since the loop must not decide
// from half a reply.
func ParseMetrics(r io.Reader) (Snapshot, error) {
	var s Snapshot
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !strings.HasPrefix(strings.TrimSpace(line), "llamacpp:") {
			continue
		}
		m, ok, err := promtext.ParseLine(line)
		if err != nil {
			return Snapshot{}, fmt.Errorf("/metrics line %d: %w", n, err)
		}
		if !ok {
			continue
		}
		switch m.Name {
		case famCycles:
			s.Cycles, s.HasSpec = m.Value, true
		case famDrafted:
			s.Drafted = m.Value
		case famAccepted:
			s.Accepted = m.Value
		case famPredicted:
			s.Predicted = m.Value
		case famPredictSecs:
			s.PredictSeconds = m.Value
		case famDecodes:
			s.Decodes = m.Value
		case famProcessing:
			s.Processing = m.Value
		case famPerPos:
			p, err := strconv.Atoi(m.Labels["position"])
			if err != nil || p < 0 || p >= maxPositions {
				return Snapshot{}, fmt.Errorf("/metrics line %d: %s has position %q, want 0-%d", n, famPerPos, m.Labels["position"], maxPositions-1)
			}
			for len(s.PerPos) <= p {
				s.PerPos = append(s.PerPos, 0)
			}
			s.PerPos[p] = m.Value
			s.HasPerPos = true
		}
	}
	if err := sc.Err(); err != nil {
		return Snapshot{}, fmt.Errorf("/metrics: %w", err)
	}
	return s, nil
}

// Delta is what happened between two scrapes of one engine.
type Delta struct {
	Cycles, Drafted, Accepted float64
	PerPos                    []float64 // cycles accepting at least p+1 draft tokens
	Predicted, PredictSeconds float64
	Decodes                   float64
	Processing                float64 // the gauge at the later scrape
	Served                    float64 // served seconds, when HasServed
	HasServed                 bool
}

// Secs is the time the cycles of d took, per sequence summed: the seconds
// clients' requests were served (Target.Served) when both scrapes had
// them, else the engine's own predict seconds.
func (d Delta) Secs() float64 {
	if d.HasServed {
		return d.Served
	}
	return d.PredictSeconds
}

// aroundProxyShare: served seconds under this share of the engine's own
// seconds over the same stretch mean that requests reached the engine
// around the proxy. Served time covers a request from hand-over to its
// last byte, its prompt and any wait included, so it is at least the
// engine's decode time for the requests the proxy saw; a request the
// engine counted just before the proxy did moves a little between
// stretches, never three quarters of one.
const aroundProxyShare = 0.25

// aroundProxy says whether served seconds are no measure of a stretch in
// which the engine counted own seconds of its own: clients sent requests
// straight to its loopback port (a local client, adapteval -direct), and
// the proxy did not time them.
func aroundProxy(served, own float64) bool {
	return own > 0 && served < aroundProxyShare*own
}

// Since returns cur − prev. ok is false when a counter went backwards: the
// engine restarted, and prev is no baseline for cur.
func (cur Snapshot) Since(prev Snapshot) (d Delta, ok bool) {
	d = Delta{
		Cycles: cur.Cycles - prev.Cycles, Drafted: cur.Drafted - prev.Drafted, Accepted: cur.Accepted - prev.Accepted,
		Predicted: cur.Predicted - prev.Predicted, PredictSeconds: cur.PredictSeconds - prev.PredictSeconds,
		Decodes: cur.Decodes - prev.Decodes, Processing: cur.Processing,
	}
	// Served seconds only grow on one engine for one slot count; read for
	// other slots they are weighed anew, and this delta takes the engine's
	// own seconds.
	if cur.HasServed && prev.HasServed && cur.ServedSlots == prev.ServedSlots && cur.Served >= prev.Served {
		d.Served, d.HasServed = cur.Served-prev.Served, true
	}
	if d.Cycles < 0 || d.Drafted < 0 || d.Accepted < 0 || d.Predicted < 0 || d.PredictSeconds < 0 || d.Decodes < 0 {
		return Delta{}, false
	}
	d.PerPos = make([]float64, len(cur.PerPos))
	for p, v := range cur.PerPos {
		var was float64
		if p < len(prev.PerPos) {
			was = prev.PerPos[p]
		}
		if d.PerPos[p] = v - was; d.PerPos[p] < 0 {
			return Delta{}, false
		}
	}
	if len(prev.PerPos) > len(cur.PerPos) { // a family cannot shrink on one engine
		return Delta{}, false
	}
	return d, true
}
