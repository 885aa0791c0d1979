package control

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// cellStat is one cell over its seeds.
type cellStat struct {
	profile, traffic string
	frac             float64 // adaptive tokens over the per-phase oracle's
	defFrac          float64 // the default's (on the first engine) over the oracle's
	oracleGain       float64 // the oracle over the default on the mean engine, − 1
	noise            float64 // the gain the noise model needs at this cell
	below            float64 // adaptive over the default − 1 (negative: below)
	switches, settle float64 // means over the seeds
}

// judged says whether the goal of 0.97 of the oracle applies: the oracle
// beats the default beyond the noise.
func (c cellStat) judged() bool { return c.oracleGain > c.noise }

// vSeeds is the runs per cell: fresh engines differ by 5.6 %, so one run
// of a cell that switches says little; the mean of 16 runs is within
// about 1.4 % of the cell's.
const vSeeds = 8

// seeds is vSeeds, or CONTROL_SEEDS (the ablation runs fewer).
func seeds() int {
	if n, err := strconv.Atoi(os.Getenv("CONTROL_SEEDS")); err == nil && n > 0 {
		return n
	}
	return vSeeds
}

func runMatrix(cfg Config, seedBase uint64) []cellStat {
	type job struct {
		i  int
		p  vProfile
		tr traffic
	}
	var jobs []job
	filter := os.Getenv("CONTROL_MATRIX_FILTER")
	for _, p := range vProfiles(nil) {
		for _, tr := range traffics(p) {
			if filter != "" && !strings.Contains(p.name+"/"+tr.name, filter) {
				continue
			}
			jobs = append(jobs, job{len(jobs), p, tr})
		}
	}
	cells := make([]cellStat, len(jobs))
	ch := make(chan job)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				cells[j.i] = runSeeds(cfg, j.p, j.tr, seedBase+uint64(j.i)*1000)
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	return cells
}

func runSeeds(cfg Config, p vProfile, tr traffic, seed uint64) cellStat {
	var sum cellOut
	var settle float64
	for i := range seeds() {
		o := runCell(cfg, p, tr.phases, seed+uint64(i), nil)
		sum.tokens, sum.oracle, sum.def, sum.defMean = sum.tokens+o.tokens, sum.oracle+o.oracle, sum.def+o.def, sum.defMean+o.defMean
		sum.switches += o.switches
		settle += o.settle
	}
	spread := 0.034
	for _, f := range tr.phases {
		if f.n > 1 {
			spread = 0.056
		}
	}
	return cellStat{profile: p.name, traffic: tr.name, frac: sum.tokens / sum.oracle, defFrac: sum.def / sum.oracle,
		oracleGain: sum.oracle/sum.defMean - 1, noise: DefaultZ*math.Sqrt2*spread + p.switchS/DefaultPayback.Seconds(),
		below: sum.tokens/sum.def - 1, switches: float64(sum.switches) / float64(seeds()), settle: settle / float64(seeds())}
}

// summary is what the ablation compares.
type summary struct {
	worst, median, worstBelow   float64
	judgedBelow97, belowDefault int
	switches                    float64
}

func summarize(cells []cellStat) summary {
	var s summary
	var fr []float64
	s.worst, s.worstBelow = math.Inf(1), math.Inf(1)
	for _, c := range cells {
		fr = append(fr, c.frac)
		s.worst = math.Min(s.worst, c.frac)
		s.worstBelow = math.Min(s.worstBelow, c.below)
		if c.judged() && c.frac < 0.97 {
			s.judgedBelow97++
		}
		if c.below < -0.01 {
			s.belowDefault++
		}
		s.switches += c.switches
	}
	sort.Float64s(fr)
	s.median = fr[len(fr)/2]
	return s
}

func (s summary) String() string {
	return fmt.Sprintf("worst %.3f median %.3f; worst vs default %+.1f%%; judged cells under 0.97: %d; cells below the default by >1%%: %d; switches %.0f",
		s.worst, s.median, 100*s.worstBelow, s.judgedBelow97, s.belowDefault, s.switches)
}

func cellTable(cells []cellStat) string {
	var b strings.Builder
	b.WriteString("| profile | traffic | oracle over default | noise | judged | default frac | frac | vs default | switches | last switch s |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range cells {
		j := ""
		if c.judged() {
			j = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %+.1f%% | %.1f%% | %s | %.3f | %.3f | %+.1f%% | %.1f | %.0f |\n",
			c.profile, c.traffic, 100*c.oracleGain, 100*c.noise, j, c.defFrac, c.frac, 100*c.below, c.switches, c.settle)
	}
	return b.String()
}

// BenchmarkControlMatrix runs the calibrated matrix in virtual time and
// reports the worst and median fraction of the per-phase oracle.
// CONTROL_MATRIX_OUT=file writes the cell table there.
func BenchmarkControlMatrix(b *testing.B) {
	var cells []cellStat
	for b.Loop() {
		cells = runMatrix(Config{}, 1)
	}
	s := summarize(cells)
	b.ReportMetric(s.worst, "worst-frac")
	b.ReportMetric(s.median, "median-frac")
	b.ReportMetric(float64(s.belowDefault), "cells-below-default")
	b.ReportMetric(float64(s.judgedBelow97), "judged-under-0.97")
	b.Log("\n" + s.String() + "\n" + cellTable(cells))
	if out := os.Getenv("CONTROL_MATRIX_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(cellTable(cells)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

var _ = slices.Sort[[]int]
