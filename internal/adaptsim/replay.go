package adaptsim

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/simcost"
)

// Recorded is one adaptive run on the H200 that a replay must reproduce:
// the cell whose fixed widths price it, the loop's window, how long the
// run lasted, and its outcome (the fixed-width mean of the width it
// ended at over the best width's).
type Recorded struct {
	Name   string
	Cell   string        // the replay cell (simcost.ReplayCell.Name)
	Window time.Duration // the loop's switch window (MLXCEL_ADAPT_WINDOW)
	Run    time.Duration // from the start to the end of adapteval's measure
	Width  int           // the width it ended at
	Frac   float64       // its outcome
}

// Recorded0312e are the three adaptive cells of 2026-12-03e, the loop of
// 5347cd0 under four clients of 128-token code prompts
// (docs/benchmark_results/h200-llamacpp-d32676d-summary-2026-12-03e.md;
// each run's length is its adapt.json's load.elapsed_ns).
var Recorded0312e = []Recorded{
	{"A: Q4_K_M, 5 s window", "h200-llamacpp-d32676d-q4_k_m-pair7243L36-code-c4-2026-12-03e", 5 * time.Second, 55500 * time.Millisecond, 3, 0.936},
	{"B: Q8_0, 5 s window", "h200-llamacpp-d32676d-q8_0-pair7243L36-code-c4-2026-12-03e", 5 * time.Second, 59400 * time.Millisecond, 4, 0.906},
	{"P: Q4_K_M, 1 m window", "h200-llamacpp-d32676d-q4_k_m-pair7243L36-code-c4-2026-12-03e", time.Minute, 480500 * time.Millisecond, 4, 0.983},
}

// ReplayResult is a loop's replay of one recorded run over seeds.
type ReplayResult struct {
	Recorded
	// Frac is the mean over seeds of the fixed-width rate (the replay
	// model's closed form, the recorded means) of the width each run
	// ended at, over the best width's: the recorded outcome's measure.
	Frac, SD float64
	// AtOrBelow is the share of seeds whose outcome was no better than
	// the recorded one (a single hardware run is one draw of this
	// distribution); SameWidth the share that ended at its width.
	AtOrBelow, SameWidth float64
	Ends                 []int   // each seed's end width
	Switches             float64 // mean per run
}

// Within says whether the replay reproduces the recorded outcome within
// tol.
func (r ReplayResult) Within(tol float64) bool { return math.Abs(r.Frac-r.Recorded.Frac) <= tol }

// Replay runs the loop mk makes for a window on each recorded run,
// seeds times, on the replay cells of dir, under steady traffic of the
// cell's clients.
func Replay(dir string, recs []Recorded, mk func(window time.Duration) Factory, seeds int) ([]ReplayResult, error) {
	cells, err := simcost.LoadReplayCells(dir)
	if err != nil {
		return nil, err
	}
	byName := map[string]simcost.ReplayCell{}
	for _, c := range cells {
		byName[c.Name] = c
	}
	var out []ReplayResult
	for _, r := range recs {
		c, ok := byName[r.Cell]
		if !ok {
			return nil, fmt.Errorf("replay %s: no cell %s-fixed.json in %s", r.Name, r.Cell, dir)
		}
		out = append(out, replayOne(ReplayProfile(c), r, mk(r.Window), seeds))
	}
	return out, nil
}

func replayOne(p Profile, r Recorded, f Factory, seeds int) ReplayResult {
	tr := Traffic{"steady", []Phase{{Dur: r.Run, Clients: p.Clients}}}
	a := newAccept(p.Model, 1, DefaultMaxWidth)
	best := 0.0
	for w := 1; w <= DefaultMaxWidth; w++ {
		best = math.Max(best, rate(p.Model, &a, w, p.Clients, p.ReqTokens))
	}
	res := ReplayResult{Recorded: r}
	var sum, sum2 float64
	for i := range seeds {
		out := Run(p, tr, f(p), uint64(i)+1, Options{Horizon: r.Run})
		fr := rate(p.Model, &a, out.EndWidth, p.Clients, p.ReqTokens) / best
		sum, sum2 = sum+fr, sum2+fr*fr
		res.Ends = append(res.Ends, out.EndWidth)
		if fr <= r.Frac+0.0005 {
			res.AtOrBelow++
		}
		if out.EndWidth == r.Width {
			res.SameWidth++
		}
		res.Switches += float64(len(out.Switches))
	}
	n := float64(seeds)
	res.Frac, res.Switches = sum/n, res.Switches/n
	res.AtOrBelow, res.SameWidth = res.AtOrBelow/n, res.SameWidth/n
	res.SD = math.Sqrt(math.Max(0, sum2/n-res.Frac*res.Frac))
	return res
}

// ReplayMarkdown is the replay's table.
func ReplayMarkdown(loop string, rs []ReplayResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| run (%s) | recorded end width | recorded | sim mean (SD over seeds) | within ±0.03 | seeds at or below the recorded | seeds at its width | sim end widths | switches a run |\n|---|---|---|---|---|---|---|---|---|\n", loop)
	for _, r := range rs {
		ok := "no"
		if r.Within(0.03) {
			ok = "yes"
		}
		fmt.Fprintf(&b, "| %s | %d | %.3f | %.3f (%.3f) | %s | %.0f %% | %.0f %% | %s | %.1f |\n", r.Name, r.Recorded.Width, r.Recorded.Frac, r.Frac, r.SD, ok,
			100*r.AtOrBelow, 100*r.SameWidth, counted(r.Ends), r.Switches)
	}
	return b.String()
}
