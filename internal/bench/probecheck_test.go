package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/record"
)

func TestCheckProbe(t *testing.T) {
	arm := func(kind string, w int, ms float64, status string) record.Arm {
		m := evidence.CostCycles + " (cycles from x)"
		if kind == KindClassic {
			m = evidence.CostClassic
		}
		return record.Arm{Kind: kind, Width: w, Status: status, Cost: record.Cost{MSPerCycle: ms, Method: m}}
	}
	ok := record.StatusOK
	// The H200 Q8_0 figures of 2026-12-01 (flash attention): probe under
	// every cycle; and the build without it, where 2 rows cost more than
	// the whole width-2 cycle.
	rows := func(ms ...float64) []record.ProbeRow {
		var r []record.ProbeRow
		for i, w := range []int{1, 2, 4, 8} {
			r = append(r, record.ProbeRow{Rows: w, MS: ms[i]})
		}
		return r
	}
	fa := rows(2.27, 2.34, 2.87, 3.52)
	noFA := rows(3.71, 4.24, 4.32, 4.35)
	arms := []record.Arm{arm(KindClassic, 0, 2.18, ok), arm(KindDefault, 4, 3.81, ok), arm(KindWidth, 2, 2.90, ok), arm(KindWidth, 4, 3.80, ok), arm(KindWidth, 8, 5.59, ok), arm(KindWidth, 6, 4.8, record.StatusFailed)}
	cases := []struct {
		name    string
		pc      record.ProbeCheck
		arms    []record.Arm
		ok      bool
		verdict string
		widths  []int
	}{
		{"under every cycle", record.ProbeCheck{Rows: fa}, arms, true, "under the measured cycle at every width (3); the rest, drafting, is 0.30–0.56 ms", []int{1, 2, 4, 8}},
		{"over at narrow widths", record.ProbeCheck{Rows: noFA}, []record.Arm{arm(KindClassic, 0, 2.81, ok), arm(KindWidth, 2, 2.94, ok), arm(KindWidth, 4, 4.16, ok), arm(KindWidth, 8, 5.61, ok)}, false, "at or above the measured cycle at width 2, 4:", []int{1, 2, 4, 8}},
		{"probe failed", record.ProbeCheck{Error: "the engine cannot be probed"}, arms, false, "the probe gave no curve: the engine cannot be probed", nil},
		{"no width with a cost", record.ProbeCheck{Rows: fa}, []record.Arm{arm(KindClassic, 0, 2.18, ok), arm(KindWidth, 2, 0, ok)}, false, "no speculative width measured a whole cycle", []int{1}},
		{"verify-only costs (mlxcel sync ms)", record.ProbeCheck{Rows: fa}, []record.Arm{arm(KindClassic, 0, 2.18, ok), {Kind: KindWidth, Width: 2, Status: ok, Cost: record.Cost{MSPerCycle: 2.0, Method: "target_argmax_sync_ms / rounds (engine diagnostics)"}}}, false, "no speculative width measured a whole cycle", []int{1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pc := c.pc
			rec := &record.Record{Arms: c.arms, ProbeCheck: &pc}
			checkProbe(rec)
			var ws []int
			for _, r := range pc.Check {
				ws = append(ws, r.Width)
			}
			if pc.OK != c.ok || !strings.Contains(pc.Verdict, c.verdict) || len(ws) != len(c.widths) {
				t.Fatalf("ok %v verdict %q widths %v; want %v %q %v", pc.OK, pc.Verdict, ws, c.ok, c.verdict, c.widths)
			}
			for i := range ws {
				if ws[i] != c.widths[i] {
					t.Errorf("widths %v, want %v", ws, c.widths)
				}
			}
		})
	}
	// The drafting cost is (cycle − probe) / (W − 1).
	pc := record.ProbeCheck{Rows: fa}
	rec := &record.Record{Arms: arms, ProbeCheck: &pc}
	checkProbe(rec)
	if d := pc.Check[3].DraftPerTokenMS; d < 0.295 || d > 0.296 {
		t.Errorf("width 8 drafting %.4f ms per token, want (5.59-3.52)/7 = 0.2957", d)
	}
	md := string(RenderMarkdown(rec))
	if !strings.Contains(md, "## Verify-cost probe check") || !strings.Contains(md, "| 8 | 3.52 | 5.59 | 0.30 |") || !strings.Contains(md, "| 1 (classic) | 2.27 | 2.18 | — |") || !strings.Contains(md, "medians). The probe is under") {
		t.Errorf("markdown lacks the probe check:\n%s", md)
	}
	checkProbe(&record.Record{}) // no probe: nothing to do, no panic
}

// With Options.Probe the harness probes once, on the default arm after its
// last round, under both schedules: with no progress writer it must not
// write one (a nil writer), and with JSON progress every line stays JSON.
// The fake engine is no llama-server, so the probe fails and says why; the
// record is still complete.
func TestRunProbes(t *testing.T) {
	for _, schedule := range []string{ScheduleRestart, ScheduleResident} {
		for _, progress := range []string{"none", "json"} {
			t.Run(schedule+"/"+progress, func(t *testing.T) {
				e := newFakeEngine(t, costModels())
				o := testOptions(specArms())
				o.Schedule, o.Probe = schedule, true
				var out bytes.Buffer
				if progress == "json" {
					o.Progress, o.JSONProgress = &out, true
				}
				rec := newRecord()
				if err := Run(context.Background(), o, e.starter(), rec); err != nil {
					t.Fatal(err)
				}
				pc := rec.ProbeCheck
				if !rec.Complete || pc == nil || pc.Error == "" || pc.OK || !strings.HasPrefix(pc.Verdict, "the probe gave no curve") || !strings.HasPrefix(pc.Arm, "default") {
					t.Fatalf("complete %v, probe check %+v", rec.Complete, pc)
				}
				probes := 0
				for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
					if progress == "none" {
						break
					}
					var ev map[string]any
					if err := json.Unmarshal([]byte(line), &ev); err != nil {
						t.Fatalf("progress line is not JSON: %q", line)
					}
					if ev["event"] == "probe" {
						probes++
					}
				}
				if progress == "json" && probes != 1 {
					t.Errorf("%d probe events, want 1", probes)
				}
			})
		}
	}
}
