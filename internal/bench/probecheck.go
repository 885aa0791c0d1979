package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/internal/defaults"
	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/probe"
	"github.com/speclaunch/speclaunch/internal/record"
)

// probeArm is the arm whose server the probe runs on: the default arm,
// else the first width arm; -1 when none drafts.
func (h *harness) probeArm() int {
	first := -1
	for i, a := range h.o.Arms {
		switch {
		case a.Kind == KindDefault && a.Width >= 2:
			return i
		case a.Kind != KindClassic && a.Width >= 2 && first < 0:
			first = i
		}
	}
	return first
}

// probeCost runs the verify-cost probe (internal/probe) once, on arm i's
// server after its last measured visit, so it never runs between measured
// requests. A probe that fails is recorded with why; the bench goes on.
func (h *harness) probeCost(ctx context.Context, i int, srv Server) {
	if !h.o.Probe || h.probed || srv == nil || i != h.probeArm() || h.failed[i] {
		return
	}
	h.probed = true
	// The rows the check needs: one (classic) and each measured width.
	rows := []int{1}
	for _, a := range h.o.Arms {
		if a.Width >= 2 && a.Width <= defaults.AdaptMaxWidth {
			rows = append(rows, a.Width)
		}
	}
	slices.Sort(rows)
	rows = slices.Compact(rows)
	pc := &record.ProbeCheck{Arm: h.rec.Arms[i].Label, Reps: probe.DefaultReps}
	h.rec.ProbeCheck = pc
	h.p.probing(pc.Arm, rows)
	pctx, cancel := context.WithTimeout(ctx, probe.DefaultTimeout)
	defer cancel()
	// The harness's own client: one loopback connection per request.
	c, err := probe.Run(pctx, h.cs[0].http, srv.BaseURL(), rows, probe.DefaultReps)
	if err != nil {
		pc.Error = err.Error()
		return
	}
	for rows, ms := range c.VerifyMS {
		pc.Rows = append(pc.Rows, record.ProbeRow{Rows: rows, MS: ms})
	}
	slices.SortFunc(pc.Rows, func(a, b record.ProbeRow) int { return a.Rows - b.Rows })
}

// checkProbe sets each measured width's cycle beside the probe at its rows
// and says whether the probe can be trusted: under the cycle everywhere.
func checkProbe(rec *record.Record) {
	pc := rec.ProbeCheck
	if pc == nil {
		return
	}
	pc.Check, pc.OK = nil, false
	if pc.Error != "" {
		pc.Verdict = "the probe gave no curve: " + pc.Error
		return
	}
	probe := map[int]float64{}
	for _, r := range pc.Rows {
		probe[r.Rows] = r.MS
	}
	seen := map[int]bool{}
	for _, a := range rec.Arms {
		w := a.Width
		if a.Kind == KindClassic {
			w = 1
		}
		p, ok := probe[w]
		if a.Status != record.StatusOK || a.Cost.MSPerCycle <= 0 || !ok || seen[w] || !wholeCycle(a.Cost.Method) {
			continue
		}
		seen[w] = true
		row := record.ProbeWidth{Width: w, CycleMS: a.Cost.MSPerCycle, ProbeMS: p}
		if w >= 2 {
			row.DraftPerTokenMS = (row.CycleMS - p) / float64(w-1)
		}
		pc.Check = append(pc.Check, row)
	}
	slices.SortFunc(pc.Check, func(a, b record.ProbeWidth) int { return a.Width - b.Width })
	var over []string
	lo, hi, n := 0.0, 0.0, 0
	for _, r := range pc.Check {
		if r.Width < 2 {
			continue
		}
		if r.CycleMS <= r.ProbeMS {
			over = append(over, fmt.Sprint(r.Width))
			continue
		}
		if n == 0 || r.DraftPerTokenMS < lo {
			lo = r.DraftPerTokenMS
		}
		hi = max(hi, r.DraftPerTokenMS)
		n++
	}
	switch {
	case len(over) > 0:
		pc.Verdict = fmt.Sprintf("the probe is at or above the measured cycle at width %s: it prices them too high on this build, so serve --adapt would misjudge them (docs/design/adaptive.md, the probe)", strings.Join(over, ", "))
	case n == 0:
		pc.Verdict = "no speculative width measured a whole cycle (predicted_ms / cycles) to check the probe against"
	default:
		pc.OK = true
		pc.Verdict = fmt.Sprintf("the probe is under the measured cycle at every width (%d); the rest, drafting, is %.2f–%.2f ms per drafted token", n, lo, hi)
	}
}

// wholeCycle: the cost is a whole draft+verify cycle (or classic's token),
// not the verify step alone (mlxcel's sync ms per round), so the probe can
// be set against it.
func wholeCycle(method string) bool {
	return strings.HasPrefix(method, evidence.CostCycles) || strings.HasPrefix(method, evidence.CostClassic)
}
