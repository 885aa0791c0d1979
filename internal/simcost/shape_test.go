package simcost

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/record"
)

// The demo-load pairing against the shapes of the committed H200 cells
// (issue 29: "calibrated so that its one- and four-client sweeps have the
// shape of the committed H200 records"). Four clients: every committed
// adapteval fixed-width cell (clients out of step, the traffic a follower
// serves; the in-step bench sweeps at four are not that traffic's oracle,
// docs/benchmark_results/h200-llamacpp-d32676d-summary-2026-12-03.md). One
// client: the fixed-width cells and the bench sweeps at concurrency 1. With
// SIMSHAPE_OUT set it writes the figures there:
//
//	SIMSHAPE_OUT=$PWD/docs/benchmark_results/demo-load-shape-2026-12-05.md go test ./internal/simcost -run DemoLoadAgainst
const (
	// shapeReqTokens is adapteval's -max-tokens in every committed cell.
	shapeReqTokens = 128
	// followReqTokens is the request length of the follow run
	// (docs/benchmark_results/follow-demo-load-2026-12-05.md).
	followReqTokens = 200
)

// shapeWidths are the widths every committed four-client cell measured
// (all but the seam check's 2, 6 and 8).
var shapeWidths = []int{1, 2, 3, 4, 5, 6, 8}

// shapeCell is one committed cell's mean tokens/s by width (1: classic).
type shapeCell struct {
	name  string
	rates map[int]float64
}

func (s shapeCell) rel(w int) (float64, bool) {
	r, ok := s.rates[w]
	return r / s.rates[1], ok
}

func (s shapeCell) best() (int, float64) {
	bw := 1
	for _, w := range slices.Sorted(maps.Keys(s.rates)) {
		if s.rates[w] > s.rates[bw] {
			bw = w
		}
	}
	return bw, s.rates[bw]
}

// isSeam is the seam check of 2026-12-03f: a 12-layer pair whose fresh
// servers differed by up to 15 %, no fraction of an oracle claimed
// (docs/benchmark_results/h200-llamacpp-d32676d-summary-2026-12-03f.md);
// tabulated, left out of the median.
func isSeam(name string) bool { return strings.Contains(name, "-seam-") }

// committedShapes reads the four-client and one-client cells.
func committedShapes(t *testing.T) (four, one []shapeCell) {
	t.Helper()
	cells, err := LoadReplayCells("../../docs/benchmark_results/adapteval")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cells {
		s := shapeCell{name: strings.TrimPrefix(c.Name, "h200-llamacpp-d32676d-"), rates: map[int]float64{}}
		for w, xs := range c.Fixed {
			s.rates[w] = mean(xs)
		}
		if c.ReqTokens != shapeReqTokens {
			t.Fatalf("%s: %d tokens a request, the table compares at %d", c.Name, c.ReqTokens, shapeReqTokens)
		}
		if c.Clients == 4 {
			four = append(four, s)
		} else if c.Clients == 1 {
			one = append(one, s)
		}
	}
	return four, append(one, benchOneClient(t)...)
}

// benchOneClient reads the committed H200 bench records at concurrency 1
// (median end-to-end tokens/s of each arm, the arms of one width averaged).
func benchOneClient(t *testing.T) []shapeCell {
	t.Helper()
	paths, err := filepath.Glob("../../docs/benchmark_results/h200-llamacpp-*.json")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	var out []shapeCell
	for _, p := range paths {
		b, err := record.ReadFile(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		var r record.Record
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if r.Method.Concurrency > 1 || r.Simulated {
			continue
		}
		s := shapeCell{name: strings.TrimPrefix(r.Name, "h200-llamacpp-d32676d-") + " (bench)", rates: map[int]float64{}}
		byWidth := map[int][]float64{} // the default arm is a second server of its width
		for _, a := range r.Arms {
			w := a.Width
			if a.Kind == record.KindClassic {
				w = 1
			}
			if a.Stats.Median > 0 {
				byWidth[w] = append(byWidth[w], a.Stats.Median)
			}
		}
		for w, xs := range byWidth {
			s.rates[w] = mean(xs)
		}
		if _, ok := s.rates[1]; ok {
			out = append(out, s)
		}
	}
	return out
}

// demoShape is demo-load's closed-form sweep (widths 1-16) at n clients.
func demoShape(n, reqTokens int) shapeCell {
	m := DemoLoad()
	s := shapeCell{name: fmt.Sprintf("demo-load, %d-token requests", reqTokens), rates: map[int]float64{}}
	for w := 1; w <= 16; w++ {
		s.rates[w] = m.RateAt(w, n, reqTokens)
	}
	return s
}

// relStats is the median, least and largest rate relative to classic at
// width w over the cells that measured it, seam check left out.
func relStats(cells []shapeCell, w int) (med, lo, hi float64, n int) {
	var xs []float64
	for _, c := range cells {
		if r, ok := c.rel(w); ok && !isSeam(c.name) {
			xs = append(xs, r)
		}
	}
	if len(xs) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(xs)
	return median(xs), xs[0], xs[len(xs)-1], len(xs)
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// midMean is the mean rate relative to classic over widths 3-6.
func midMean(rel func(w int) float64) float64 {
	t := 0.0
	for w := 3; w <= 6; w++ {
		t += rel(w)
	}
	return t / 4
}

// midMedian is the median over the scored four-client cells of each
// cell's mean rate over widths 3-6 relative to classic, and the standard
// error of that median (1.2533·SD/√n): how closely the committed cells
// pin the shape a sim pairing should have.
func midMedian(four []shapeCell) (med, se float64) {
	var xs []float64
	for _, c := range four {
		if !isSeam(c.name) {
			xs = append(xs, midMean(func(w int) float64 { r, _ := c.rel(w); return r }))
		}
	}
	m := mean(xs)
	ss := 0.0
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	sd := math.Sqrt(ss / float64(len(xs)-1))
	return median(xs), 1.2533 * sd / math.Sqrt(float64(len(xs)))
}

// ceilingOf is the per-phase oracle over the best fixed width when equal
// spells of one and four clients alternate: one client's best plus four's
// best, over the best width's sum at both, over the widths both measured.
func ceilingOf(one, four shapeCell) (float64, int) {
	oracle, bestFixed, fixed := 0.0, 0, 0.0
	b1, b4 := 0.0, 0.0
	for w, r4 := range four.rates {
		r1, ok := one.rates[w]
		if !ok {
			continue
		}
		b1, b4 = math.Max(b1, r1), math.Max(b4, r4)
		if s := r1 + r4; s > fixed || s == fixed && w < bestFixed {
			fixed, bestFixed = s, w
		}
	}
	oracle = b1 + b4
	return oracle / fixed, bestFixed
}

// TestDemoLoadAgainstCommittedShapes: demo-load at four clients, at the
// cells' own request length, stays inside every committed cell's range at
// each width and near their median over the mid widths; a demo-load made
// flatter (or steeper) than the hardware fails here.
func TestDemoLoadAgainstCommittedShapes(t *testing.T) {
	four, one := committedShapes(t)
	if len(four) < 9 || len(one) < 3 {
		t.Fatalf("%d four-client and %d one-client cells: the committed files are missing", len(four), len(one))
	}
	demo := demoShape(4, shapeReqTokens)
	for _, w := range shapeWidths[1:] {
		_, lo, hi, _ := relStats(four, w)
		if r, _ := demo.rel(w); r < lo || r > hi {
			t.Errorf("four clients, width %d: demo-load %.3f of classic, the committed cells %.3f-%.3f", w, r, lo, hi)
		}
	}
	hw, se := midMedian(four)
	dm := midMean(func(w int) float64 { r, _ := demo.rel(w); return r })
	if math.Abs(dm-hw) > se {
		t.Errorf("four clients, widths 3-6: demo-load %.3f of classic on average, the median cell %.3f (want within its standard error %.3f)", dm, hw, se)
	}
	if out := os.Getenv("SIMSHAPE_OUT"); out != "" && !t.Failed() {
		if err := os.WriteFile(out, []byte(shapeMarkdown(four, one)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func shapeMarkdown(four, one []shapeCell) string {
	var b strings.Builder
	b.WriteString("# demo-load against the committed H200 shapes (2026-12-05)\n\n")
	b.WriteString("Generated by `SIMSHAPE_OUT=… go test ./internal/simcost -run DemoLoadAgainst` (internal/simcost/shape_test.go).\n")
	b.WriteString("The H200 columns are measurements (llama-server d32676d); the demo-load rows are the sim's closed form\n")
	b.WriteString("(`simcost.DemoLoad().RateAt`: no noise, the mean engine), never a measurement.\n\n")
	b.WriteString("Issue 29 asks that the demo-load pairing be \"calibrated so that its one- and four-client sweeps have the shape of the\n")
	b.WriteString("committed H200 records\" and that serve following its schedule under one and four clients alternating every 2 minutes\n")
	b.WriteString("beat every single fixed width by 5 % over the whole run. This file sets demo-load's sweeps beside every committed cell\n")
	b.WriteString("and asks how far the hardware's own shapes let any schedule get above the best fixed width.\n\n")
	writeFourClients(&b, four)
	writeOneClient(&b, one)
	writeCeilings(&b, four, one)
	return b.String()
}

func relCell(s shapeCell, w int) string {
	r, ok := s.rates[w]
	if !ok {
		return "—"
	}
	_, best := s.best()
	return fmt.Sprintf("%.3f (%.3f)", r/s.rates[1], r/best)
}

func writeFourClients(b *strings.Builder, four []shapeCell) {
	b.WriteString("## Four clients out of step\n\n")
	b.WriteString("Every committed adapteval cell with fixed-width runs at four clients (`docs/benchmark_results/adapteval/*-c4-*-fixed.json`:\n")
	b.WriteString("closed-loop clients started out of step, 128-token requests, the mean of a width's 12 s windows on fresh servers), the\n")
	b.WriteString("traffic a follower serves. The in-step bench sweeps at concurrency 4 (`h200-…-c4.json`) are left out: they sent\n")
	b.WriteString("identical requests together, which overstated what speculation gives out-of-step clients by up to 1.5x\n")
	b.WriteString("([2026-12-03 summary](h200-llamacpp-d32676d-summary-2026-12-03.md)). Each width: its rate over classic's (over the cell's best).\n\n")
	b.WriteString("| cell | classic tok/s | best |")
	for _, w := range shapeWidths[1:] {
		fmt.Fprintf(b, " %d |", w)
	}
	b.WriteString("\n|---|---:|---:|" + strings.Repeat("---:|", len(shapeWidths)-1) + "\n")
	rows := append(slices.Clone(four), demoShape(4, shapeReqTokens), demoShape(4, followReqTokens))
	for _, c := range rows {
		bw, _ := c.best()
		fmt.Fprintf(b, "| %s | %.1f | %d |", c.name, c.rates[1], bw)
		for _, w := range shapeWidths[1:] {
			fmt.Fprintf(b, " %s |", relCell(c, w))
		}
		b.WriteString("\n")
	}
	b.WriteString("| **median of the committed cells** (seam check left out) | | |")
	for _, w := range shapeWidths[1:] {
		m, lo, hi, n := relStats(four, w)
		fmt.Fprintf(b, " **%.3f** (%.3f-%.3f, %d) |", m, lo, hi, n)
	}
	hw, se := midMedian(four)
	d128 := midMean(func(w int) float64 { r, _ := demoShape(4, shapeReqTokens).rel(w); return r })
	d200 := midMean(func(w int) float64 { r, _ := demoShape(4, followReqTokens).rel(w); return r })
	fmt.Fprintf(b, "\n\nEach cell's mean over widths 3-6, relative to classic: the median cell %.3f (standard error of the median %.3f); demo-load\n", hw, se)
	fmt.Fprintf(b, "%.3f at the cells' 128-token requests, %.3f at\n", d128, d200)
	b.WriteString("the follow run's 200-token requests (each request's wait for a turn of the server loop, `H200Batch.PickupSpec` rounds\n")
	b.WriteString("against `PickupClassic`, is spread over more tokens). At the request length the hardware was measured at, demo-load\n")
	if d128 <= hw {
		fmt.Fprintf(b, "is **not flatter** than the median cell at four clients: its mid widths sit %.1f %% further below classic", 100*(hw-d128))
	} else {
		fmt.Fprintf(b, "is **flatter** than the median cell at four clients: its mid widths sit %.1f %% closer to classic", 100*(d128-hw))
	}
	fmt.Fprintf(b, " (the check: within the median's standard error, %.1f %%).\n\n", 100*se)
}

func writeOneClient(b *strings.Builder, one []shapeCell) {
	b.WriteString("## One client\n\n")
	b.WriteString("The one-client fixed-width cells (adapteval, 128 tokens) and the bench sweeps at concurrency 1\n")
	b.WriteString("(`h200-llamacpp-d32676d-*.json`, medians, 128 or 200 tokens; one client is the same traffic in step or not).\n\n")
	b.WriteString("| cell | classic tok/s | best width | best over classic | width 4 (llama.cpp's default) over the best |\n|---|---:|---:|---:|---:|\n")
	var gains, w4 []float64
	for _, c := range append(slices.Clone(one), demoShape(1, shapeReqTokens), demoShape(1, followReqTokens)) {
		bw, best := c.best()
		r4 := "—"
		if v, ok := c.rates[4]; ok {
			r4 = fmt.Sprintf("%.3f", v/best)
		}
		fmt.Fprintf(b, "| %s | %.1f | %d | %.3f | %s |\n", c.name, c.rates[1], bw, best/c.rates[1], r4)
		if !strings.HasPrefix(c.name, "demo-load") {
			gains = append(gains, best/c.rates[1])
			if v, ok := c.rates[4]; ok {
				w4 = append(w4, v/best)
			}
		}
	}
	fmt.Fprintf(b, "\nThe committed cells: best over classic median %.3f (%.3f-%.3f, %d cells); width 4 median %.3f of the best.\n",
		median(gains), slices.Min(gains), slices.Max(gains), len(gains), median(w4))
	_, d := demoShape(1, shapeReqTokens).best()
	fmt.Fprintf(b, "demo-load's best is %.3fx classic: a mid-range best as asked, its gain above the committed median.\n\n", d/DemoLoad().RateAt(1, 1, shapeReqTokens))
}

func writeCeilings(b *strings.Builder, four, one []shapeCell) {
	b.WriteString("## How far a schedule can get above the best fixed width\n\n")
	b.WriteString("Under equal spells of one and four clients a schedule at best serves each spell at its best width (the per-phase\n")
	b.WriteString("oracle); a fixed width serves both spells at one width. The **ceiling** is the oracle's tokens over the best fixed\n")
	b.WriteString("width's: (best at one client + best at four) / max over W of (W at one + W at four), tok/s as measured, over the widths\n")
	b.WriteString("both cells measured. No follower gets above it, and one that reaches 0.98 of the oracle beats every fixed width by 5 %\n")
	b.WriteString("only where the ceiling is at least 1.05/0.98 = 1.071. Each one-client cell paired with each of the nine scored\n")
	b.WriteString("four-client cells (only three pairs were measured at both loads, so the pairings stand for pairs like them):\n\n")
	b.WriteString("| one-client cell | ceiling over the nine four-client cells: median | least | largest |\n|---|---:|---:|---:|\n")
	var all []float64
	for _, o := range one {
		var cs []float64
		for _, f := range four {
			if !isSeam(f.name) {
				c, _ := ceilingOf(o, f)
				cs = append(cs, c)
			}
		}
		all = append(all, cs...)
		fmt.Fprintf(b, "| %s | %.3f | %.3f | %.3f |\n", o.name, median(cs), slices.Min(cs), slices.Max(cs))
	}
	n105, n107 := 0, 0
	for _, c := range all {
		if c >= 1.05 {
			n105++
		}
		if c >= 1.05/0.98 {
			n107++
		}
	}
	fmt.Fprintf(b, "\nOver all %d pairings: median ceiling **%.3f**; %d reach 1.05, %d reach 1.071 (%d of those pair a one-client\n", len(all), median(all), n105, n107, loopers(four, one))
	b.WriteString("sweep of pair 4321, whose greedy text loops and whose best width is 8-17).\n\n")
	writeSamePair(b, four, one)
	writeDemoCeilings(b)
	writeVerdict(b, median(all), n105, n107, len(all))
}

// loopers counts the pairings reaching 1.071 whose one-client cell is
// pair 4321 (docs/benchmark_results/h200-llamacpp-d32676d-summary-2026-11-30.md).
func loopers(four, one []shapeCell) int {
	n := 0
	for _, o := range one {
		for _, f := range four {
			if c, _ := ceilingOf(o, f); !isSeam(f.name) && c >= 1.05/0.98 && strings.Contains(o.name, "pair4321-") {
				n++
			}
		}
	}
	return n
}

// writeSamePair gives the ceiling where one target and pair were measured
// at both loads (the same quant-pairNNNN prefix).
func writeSamePair(b *strings.Builder, four, one []shapeCell) {
	b.WriteString("Where the same target and pair were measured at both loads (fixed-width cells, 128 tokens):\n\n")
	b.WriteString("| four clients | one client | best fixed width | ceiling |\n|---|---|---:|---:|\n")
	for _, f := range four {
		pre, _, _ := strings.Cut(f.name, "L36-")
		for _, o := range one {
			if strings.HasPrefix(o.name, pre+"L36-") && !strings.HasSuffix(o.name, "(bench)") {
				c, w := ceilingOf(o, f)
				fmt.Fprintf(b, "| %s | %s | %d | %.3f |\n", f.name, o.name, w, c)
			}
		}
	}
	b.WriteString("\n")
}

func writeVerdict(b *strings.Builder, med float64, n105, n107, n int) {
	c128, _ := ceilingOf(demoShape(1, shapeReqTokens), demoShape(4, shapeReqTokens))
	c200, _ := ceilingOf(demoShape(1, followReqTokens), demoShape(4, followReqTokens))
	b.WriteString("## What this says about issue 29's 5 %\n\n")
	b.WriteString("The committed records do not support a steeper four-client shape than demo-load's: at the request length they were\n")
	b.WriteString("measured at, demo-load's mid widths already sit at the median cell's distance below classic, and each of its widths\n")
	b.WriteString("lies inside the committed cells' range. So demo-load is left as calibrated.\n\n")
	fmt.Fprintf(b, "On the hardware's own shapes a schedule's ceiling over the best fixed width is %.3f at the median pairing (%d of %d\n", med, n105, n)
	fmt.Fprintf(b, "pairings reach 1.05, %d reach the 1.071 a follower at 0.98 of the oracle needs); on demo-load it is %.3f at\n", n107, c128)
	fmt.Fprintf(b, "128-token requests and %.3f at the follow run's 200. The figure \"beats every single fixed width by >= 5 %% over the\n", c200)
	b.WriteString("whole run\" is **not reachable on a pairing calibrated to the hardware**: the hardware's width 3 or 4 is within a\n")
	b.WriteString("few per cent of the best at both loads, so a fixed width that is nearly right at both leaves a schedule little to\n")
	b.WriteString("earn. Reaching it would take a pairing steeper than the committed cells (a one-client gain like the looping pair\n")
	b.WriteString("4321's, or four-client widths further below classic than the median cell), that is, a sim tuned to pass the figure.\n")
}

func writeDemoCeilings(b *strings.Builder) {
	b.WriteString("demo-load's own ceiling, widths 1-16:\n\n| requests | one client: best | four: best | best fixed width | ceiling |\n|---|---|---|---:|---:|\n")
	for _, rt := range []int{shapeReqTokens, followReqTokens} {
		one, four := demoShape(1, rt), demoShape(4, rt)
		c, fw := ceilingOf(one, four)
		b1, r1 := one.best()
		b4, r4 := four.best()
		fmt.Fprintf(b, "| %d tokens | %d at %.1f tok/s | %d at %.1f | %d | **%.3f** |\n", rt, b1, r1, b4, r4, fw, c)
	}
	b.WriteString("\n")
}
