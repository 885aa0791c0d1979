package bench

import (
	"fmt"
	"image/color"
	"slices"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/record"
)

// renderLoadMarkdown renders a load sweep: the schedule earned first,
// then per level the arms, the spread between engines and the bucket's
// reason, then the method and the raw windows.
func renderLoadMarkdown(rec *record.Record) []byte {
	md := &mdWriter{rec: rec}
	md.header()
	md.w("## Schedule earned\n\n")
	if e := rec.Earned; e != nil {
		md.w("**%s** (`%s`; as policy triples `schedule = %s`).\n\n", e.Describe, e.Text, triplesText(e.Triples))
	}
	md.w("%s\n\n", rec.Verdict.Why)
	if s := EntryVerdict(rec); s != "" {
		md.w("%s\n\n", s)
	}
	if rec.Verdict.EarnsEntry {
		md.w("```toml\n%s```\n\n", rec.Verdict.Entry)
	}
	md.w("| clients | width | from | why |\n|---:|---:|---|---|\n")
	for _, l := range rec.Levels {
		md.w("| %d | %s | %s | %s |\n", l.Concurrency, widthWord(l.Bucket.Width), l.Bucket.From, cell(l.Bucket.Why))
	}
	md.w("\n")
	md.hostAndEngine()
	md.models()
	md.loadMethod()
	for i := range rec.Levels {
		md.loadLevel(i)
	}
	md.notes()
	md.loadRaw()
	return md.Bytes()
}

func (md *mdWriter) loadMethod() {
	m := md.rec.Method
	md.w("## Method\n\n")
	if l := m.Load; l != nil {
		md.w("- levels (concurrent clients): %s; %d fresh engines per arm\n", joinInts(l.Levels), l.Engines)
		md.w("- per engine and level: %.1f s warm-up, then %d windows of %.1f s\n", l.WarmS, l.Windows, l.WindowS)
		md.w("- traffic: %s\n", l.Traffic)
	}
	if m.Slots > 0 || m.SlotsFrom != "" {
		md.w("- engine slots: %s (%s)\n", intOrDash(m.Slots), orDash(m.SlotsFrom))
	}
	md.w("- max tokens %d, %s, endpoint %s\n", m.MaxTokens, orDash(m.Sampling), orDash(m.Endpoint))
	if b := m.Bootstrap; b != nil {
		md.w("- bootstrap: %d resamples, seed %d; units: the engines (a run's round is its engine)\n", b.Resamples, b.Seed)
	}
	if m.WallS > 0 {
		md.w("- wall time %.0f s; the harness's own CPU %.1f s\n", m.WallS, m.HarnessCPUS)
	}
	md.w("\n%s\n\n", m.Description)
}

func (md *mdWriter) loadLevel(i int) {
	l := &md.rec.Levels[i]
	md.w("## %d %s\n\n", l.Concurrency, Plural(l.Concurrency, "client", "clients"))
	md.w("| arm | width | status | engines | min | median | max | vs classic | vs default (P better) | engine medians |\n|---|---:|---|---:|---:|---:|---:|---:|---|---|\n")
	spread := map[string][]float64{}
	for _, a := range l.Spread.ByArm {
		spread[a.Label] = a.Medians
	}
	for j := range l.Arms {
		a := &l.Arms[j]
		vd := "—"
		if c := a.VsDefault; c != nil {
			vd = fmt.Sprintf("%.3f (%.3f)", c.Ratio, c.PBetter)
		}
		md.w("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", cell(a.Label), widthCell(a), a.Status, engineCount(a),
			f1(a.Stats.Min), f1(a.Stats.Median), f1(a.Stats.Max), speedup(a), vd, floats(spread[a.Label]))
	}
	md.w("\nSpread between engines: largest %.1f%%, median %.1f%% of an arm's median (%d engines).\n\n", 100*l.Spread.MaxRel, 100*l.Spread.MedianRel, l.Spread.Engines)
	if few := evidence.FewEngines(l.Spread.Engines); few != "" {
		md.w("Note: %s.\n\n", few)
	}
	if q := QueueNote(md.rec.Method.Slots, md.rec.Method.SlotsFrom, l.Concurrency); q != "" {
		md.w("Note: %s.\n\n", q)
	}
	md.w("Bucket: %s. %s\n\n", widthWord(l.Bucket.Width), l.Bucket.Why)
}

func (md *mdWriter) loadRaw() {
	md.w("## Raw windows\n\n| clients | arm | engine | tok/s | tokens | s | error |\n|---:|---|---:|---:|---:|---:|---|\n")
	for _, l := range md.rec.Levels {
		for _, a := range l.Arms {
			for _, r := range a.Runs {
				md.w("| %d | %s | %d | %s | %d | %.2f | %s |\n", l.Concurrency, cell(a.Label), r.Round, f1(r.TokPerS), r.CompletionTokens, r.WallS, cell(r.Error))
			}
		}
	}
	md.w("\n")
}

func engineCount(a *record.Arm) int {
	seen := map[int]bool{}
	for _, r := range a.Runs {
		if r.Measured() {
			seen[r.Round] = true
		}
	}
	return len(seen)
}

func floats(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = f1(x)
	}
	return orDash(strings.Join(s, ", "))
}

// Plural is one for a count of 1 and many for any other: the one spelling
// of a counted noun in what bench and tune say.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func widthWord(w int) string {
	switch {
	case w == 1:
		return "off (width 1)"
	case w <= 0:
		return "—"
	}
	return fmt.Sprintf("width %d", w)
}

// triplesText is the TOML form: [[1, 1, 6], [2, 3, 4], [4, 0, 1]].
func triplesText(ts [][]int) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = fmt.Sprintf("[%d, %d, %d]", t[0], t[1], t[2])
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// levelColors tell the levels apart on the plot.
var levelColors = []color.Color{
	color.NRGBA{R: 31, G: 119, B: 180, A: 255}, color.NRGBA{R: 214, G: 39, B: 40, A: 255},
	color.NRGBA{R: 44, G: 160, B: 44, A: 255}, color.NRGBA{R: 148, G: 103, B: 189, A: 255},
	color.NRGBA{R: 255, G: 127, B: 14, A: 255}, color.NRGBA{R: 140, G: 86, B: 75, A: 255},
}

// renderLoadSVG plots tokens/s against width for each level: classic at
// width 1, each measured arm's median with its min–max, one line per
// level, and the level's earned width ringed.
func renderLoadSVG(rec *record.Record) ([]byte, error) {
	p, leg := newRecordPlot(rec)
	p.X.Label.Text = "width (verify rows; 1 = classic, speculation off)"
	p.Y.Label.Text = "aggregate tokens/s of all clients"
	lo, hi := 1, 2
	for li, l := range rec.Levels {
		pts := levelPoints(l)
		if len(pts.XYs) == 0 {
			continue
		}
		col := levelColors[li%len(levelColors)]
		hi = max(hi, int(pts.XYs[len(pts.XYs)-1].X))
		line, err := plotter.NewLine(pts.XYs)
		if err != nil {
			return nil, fmt.Errorf("level %d line: %w", l.Concurrency, err)
		}
		line.Color = col
		p.Add(line)
		if err := addPoints(p, leg, pts, fmt.Sprintf("%d %s", l.Concurrency, Plural(l.Concurrency, "client", "clients")), draw.CircleGlyph{}, col); err != nil {
			return nil, err
		}
		if i := slices.IndexFunc(pts.XYs, func(xy plotter.XY) bool { return int(xy.X) == l.Bucket.Width }); i >= 0 {
			ring, err := plotter.NewScatter(plotter.XYs{pts.XYs[i]})
			if err != nil {
				return nil, err
			}
			ring.Shape, ring.Color, ring.Radius = draw.RingGlyph{}, col, vg.Points(7)
			p.Add(ring)
		}
	}
	leg.Add("ringed: the width the level earned")
	p.X.Min, p.X.Max = float64(lo)-0.5, float64(hi)+0.5
	p.X.Tick.Marker = widthTicks{}
	return drawSVG(p, leg)
}

// levelPoints are a level's measured arms by width (classic at 1), one
// point per width (an explicit width arm over the default at one width).
func levelPoints(l record.Level) errPoints {
	lv := (&record.Record{Arms: l.Arms})
	byW := lv.Representatives()
	if c := lv.ClassicArm(); c != nil && c.Status == record.StatusOK && c.Stats.N > 0 {
		byW[1] = c
	}
	ws := make([]int, 0, len(byW))
	for w, a := range byW {
		if a.Stats.N > 0 {
			ws = append(ws, w)
		}
	}
	slices.Sort(ws)
	var pts errPoints
	for _, w := range ws {
		s := byW[w].Stats
		pts.XYs = append(pts.XYs, plotter.XY{X: float64(w), Y: s.Median})
		pts.lo, pts.hi = append(pts.lo, s.Median-s.Min), append(pts.hi, s.Max-s.Median)
	}
	return pts
}
