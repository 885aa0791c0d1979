package adaptsim

import (
	"fmt"
	"os"
	"strconv"
	"testing"
)

// Controllers are the controllers the matrix benchmark runs, by name
// (ADAPTSIM_CONTROLLER picks one; default "control", added by control_test.go). A new controller adds
// its entry here.
var Controllers = map[string]Factory{
	"fixed": func(Profile) Controller { return Fixed{} },
}

// matrixSeeds is the runs per cell: fresh engines differ by 6.6 % at a
// speculative width under four clients (simcost.H200Spread), so one run
// of a cell that switches says little, and with four a cell's fraction of
// the oracle moved by up to 0.034 with its seeds
// (docs/benchmark_results/sim-matrix-seeds-2026-12-07.md).
const matrixSeeds = 8

// BenchmarkAdaptSimMatrix runs the calibrated matrix (Profiles × Traffics)
// with one controller and reports the worst and median fraction of the
// per-phase oracle and the cells below the default. With
// ADAPTSIM_MATRIX_OUT set it writes the report there as markdown:
//
//	ADAPTSIM_MATRIX_OUT=$PWD/docs/benchmark_results/sim-matrix-calibrated-2026-12-05.md \
//	  go test ./internal/adaptsim -run X -bench AdaptSimMatrix -benchtime 1x
//
// ADAPTSIM_CONTROLLER names the controller (Controllers), ADAPTSIM_SEEDS
// the runs per cell.
func BenchmarkAdaptSimMatrix(b *testing.B) {
	name := os.Getenv("ADAPTSIM_CONTROLLER")
	if name == "" {
		name = "control"
	}
	f, ok := Controllers[name]
	if !ok {
		b.Fatalf("ADAPTSIM_CONTROLLER=%q: no such controller (want one of the keys of Controllers)", name)
	}
	seeds := matrixSeeds
	if v := os.Getenv("ADAPTSIM_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("ADAPTSIM_SEEDS=%q: want a positive count of runs per cell", v)
		}
		seeds = n
	}
	ps, err := Profiles(replayDir)
	if err != nil {
		b.Fatal(err)
	}
	var cells []Cell
	for b.Loop() {
		cells = Matrix(ps, f, seeds, 8, Options{}) // eight: today's loop mostly waits on its ticker
	}
	s := Summarize(cells)
	b.ReportMetric(s.Worst, "worst-frac")
	b.ReportMetric(s.Median, "median-frac")
	b.ReportMetric(float64(s.BelowDefault), "cells-below-default")
	b.ReportMetric(float64(s.JudgedUnder97), "judged-under-0.97")
	report := Report(name, seeds, cells)
	if out := os.Getenv("ADAPTSIM_MATRIX_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
			b.Fatal(fmt.Errorf("ADAPTSIM_MATRIX_OUT: %w", err))
		}
	}
	b.Log("\n" + report)
}
