package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/internal/evidence"
)

// WarmBins are the edges, in seconds after an engine's first client
// request began, of the bins -warm reports; the last bin is the engine's
// own steady reference.
var WarmBins = []float64{0, 2, 5, 10, 20}

// EngineWarm is how one engine's requests ran by the time they began,
// against its own steady requests: -warm's question is whether an engine
// runs slow for its first seconds (after a switch, beside the old engine's
// drain) and for how long.
type EngineWarm struct {
	Engine int
	// Classic is an engine that drafted nothing.
	Classic bool
	// RefMSPerToken is the median eval ms a token of the requests that
	// began at or after the last bin's edge.
	RefMSPerToken float64
	// Ratio[i] is bin i's median ms a token over RefMSPerToken (0 where
	// the bin has no request); N[i] is its request count.
	Ratio []float64
	N     []int
}

// minRef is the fewest steady requests an engine needs to be reported:
// fewer make its reference a guess.
const minRef = 5

// Warm groups each engine's requests of at least minTokens eval tokens by
// when they began (EngineS less prompt and eval time) after its first
// such request began. Engines with fewer than minRef steady requests are
// left out.
func Warm(rows []Row, minTokens int) []EngineWarm {
	byEngine := map[int][]Row{}
	for _, r := range rows {
		if r.EvalN >= minTokens && r.EvalN > 0 {
			byEngine[r.Engine] = append(byEngine[r.Engine], r)
		}
	}
	var out []EngineWarm
	for e, rs := range byEngine {
		if w, ok := engineWarm(e, rs); ok {
			out = append(out, w)
		}
	}
	slices.SortFunc(out, func(a, b EngineWarm) int { return a.Engine - b.Engine })
	return out
}

func engineWarm(e int, rs []Row) (EngineWarm, bool) {
	begin := func(r Row) float64 { return r.EngineS - (r.PromptMS+r.EvalMS)/1e3 }
	t0 := begin(rs[0])
	drafted := 0
	for _, r := range rs {
		t0 = min(t0, begin(r))
		drafted += r.DraftTokens
	}
	nb := len(WarmBins)
	per := make([][]float64, nb)
	for _, r := range rs {
		t := begin(r) - t0
		i := nb - 1
		for j := 1; j < nb; j++ {
			if t < WarmBins[j] {
				i = j - 1
				break
			}
		}
		per[i] = append(per[i], r.EvalMS/float64(r.EvalN))
	}
	if len(per[nb-1]) < minRef {
		return EngineWarm{}, false
	}
	w := EngineWarm{Engine: e, Classic: drafted == 0, RefMSPerToken: evidence.Median(per[nb-1]), Ratio: make([]float64, nb), N: make([]int, nb)}
	for i, v := range per {
		w.N[i] = len(v)
		if len(v) > 0 {
			w.Ratio[i] = evidence.Median(v) / w.RefMSPerToken
		}
	}
	return w, true
}

// writeWarm prints one row an engine, then the median ratio a bin over
// the engines after the first (each started beside a serving engine) of
// each kind.
func writeWarm(w io.Writer, ws []EngineWarm) {
	fmt.Fprint(w, "engine\tkind\tref_ms_per_token")
	for i := range WarmBins {
		fmt.Fprintf(w, "\t%s", binName(i))
	}
	fmt.Fprintln(w)
	for _, e := range ws {
		fmt.Fprintf(w, "%d\t%s\t%.3f", e.Engine, kindName(e.Classic), e.RefMSPerToken)
		for i := range e.Ratio {
			fmt.Fprintf(w, "\t%.3f (%d)", e.Ratio[i], e.N[i])
		}
		fmt.Fprintln(w)
	}
	for _, classic := range []bool{true, false} {
		fmt.Fprintf(w, "# engines after the first, %s: median ratio a bin (engines)", kindName(classic))
		for i := range WarmBins {
			var v []float64
			for _, e := range ws {
				if e.Engine > 1 && e.Classic == classic && e.N[i] > 0 {
					v = append(v, e.Ratio[i])
				}
			}
			if len(v) == 0 {
				fmt.Fprintf(w, "\t%s -", binName(i))
				continue
			}
			fmt.Fprintf(w, "\t%s %.3f (%d)", binName(i), evidence.Median(v), len(v))
		}
		fmt.Fprintln(w)
	}
}

func binName(i int) string {
	if i == len(WarmBins)-1 {
		return fmt.Sprintf("%g+s", WarmBins[i])
	}
	return fmt.Sprintf("%g-%gs", WarmBins[i], WarmBins[i+1])
}

func kindName(classic bool) string {
	if classic {
		return "classic"
	}
	return "drafting"
}

// tsvHeader is the header line of this command's own output.
const tsvHeader = "engine\ttask\tslot\tengine_s\tprompt_n\tprompt_ms\teval_n\teval_ms\tdraft_accepted\tdraft_generated"

// ParseTSV reads this command's own output back, so that -warm and
// -follow run on a committed engine-timings file as on the log it came
// from. Lines starting with # are skipped.
func ParseTSV(r io.Reader) ([]Row, error) {
	sc := bufio.NewScanner(r)
	var rows []Row
	header := false
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		switch {
		case strings.HasPrefix(line, "#") || line == "":
			continue
		case !header:
			if line != tsvHeader {
				return nil, fmt.Errorf("line %d: not an engine-timings header", n)
			}
			header = true
			continue
		}
		var r Row
		if _, err := fmt.Sscanf(line, "%d\t%d\t%d\t%g\t%d\t%g\t%d\t%g\t%d\t%d", &r.Engine, &r.Task, &r.Slot, &r.EngineS, &r.PromptN, &r.PromptMS, &r.EvalN, &r.EvalMS, &r.DraftAccepted, &r.DraftTokens); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}
