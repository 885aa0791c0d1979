package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/speclaunch/speclaunch/internal/record"
)

// errPoints are medians with their min–max as asymmetric error bars.
type errPoints struct {
	plotter.XYs
	lo, hi []float64 // distances below and above the median
}

func (e errPoints) YError(i int) (float64, float64) { return e.lo[i], e.hi[i] }

// Plot geometry: the legend has a column of its own to the right of the
// data, so it never covers a point.
const (
	svgW       = 8.5 * vg.Inch
	svgH       = 4.5 * vg.Inch
	svgLegendW = 2.3 * vg.Inch
)

// svgFontFamily replaces the font family gonum/plot writes ("Liberation
// Sans", whose metrics laid the text out). Arimo, Arial and Helvetica share
// those metrics, so the text renders the same where Liberation is not
// installed, and any sans-serif font stands in last.
const svgFontFamily = "font-family:'Liberation Sans',Arimo,Arial,Helvetica,sans-serif"

func sans(size vg.Length) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: size}
}

// RenderSVG plots tokens/s against width: classic's min–max as a shaded
// band with its median as a line, each measured arm's median with min–max
// error bars and its speedup over classic written beside it, the best
// width ringed. Arms that are NOT A MEASUREMENT or failed are left out: a
// point on the plot reads as a measurement.
func RenderSVG(rec *record.Record) ([]byte, error) {
	if len(rec.Levels) > 0 {
		return renderLoadSVG(rec)
	}
	p, leg := newRecordPlot(rec)
	s := plotSeries(rec)
	x0, x1 := float64(s.lo)-0.5, float64(s.hi)+0.5
	if err := addClassicBand(p, leg, rec, x0, x1); err != nil {
		return nil, err
	}
	for _, ser := range []struct {
		pts   errPoints
		name  string
		shape draw.GlyphDrawer
		col   color.Color
	}{
		{s.widths, "width: median, min–max", draw.CircleGlyph{}, color.NRGBA{R: 31, G: 119, B: 180, A: 255}},
		{s.def, "engine's default", draw.SquareGlyph{}, color.NRGBA{R: 214, G: 39, B: 40, A: 255}},
		{s.pol, "policy's width", draw.TriangleGlyph{}, color.NRGBA{R: 44, G: 160, B: 44, A: 255}},
	} {
		if err := addPoints(p, leg, ser.pts, ser.name, ser.shape, ser.col); err != nil {
			return nil, err
		}
	}
	if err := addBest(p, leg, rec); err != nil {
		return nil, err
	}
	if err := addSpeedupLabels(p, s.labels); err != nil {
		return nil, err
	}
	p.X.Min, p.X.Max = x0, x1+0.4 // room for the last speedup label
	p.X.Tick.Marker = widthTicks{}
	return drawSVG(p, leg)
}

// newRecordPlot makes the empty plot and legend with the record's title
// (the GPU and the key) and the axis labels.
func newRecordPlot(rec *record.Record) (*plot.Plot, *plot.Legend) {
	p := plot.New()
	p.Title.TextStyle.Font = sans(11)
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = sans(10)
		ax.Tick.Label.Font = sans(9)
	}
	leg := plot.NewLegend()
	leg.TextStyle.Font = sans(9)
	leg.Top, leg.Left = true, true

	gpu := rec.Host.GPU
	if gpu == "" {
		gpu = "capability " + rec.Key.Capability
	}
	p.Title.Text = fmt.Sprintf("%s\nengine=%s drafter=%s capability=%s quant=%s",
		gpu, rec.Key.Engine, rec.Key.Drafter, rec.Key.Capability, rec.Key.Quant)
	if rec.Simulated {
		p.Title.Text += " (SIMULATED)"
	}
	p.X.Label.Text = "width (verify rows)"
	p.Y.Label.Text = "end-to-end tokens/s (speedup over classic beside each point)"
	return p, &leg
}

// svgSeries is what the plot shows of the measured arms: their points by
// kind, the speedup labels, and the span of widths.
type svgSeries struct {
	widths, def, pol errPoints
	labels           plotter.XYLabels
	lo, hi           int // the narrowest and widest plotted width
}

// plotSeries sorts the measured arms into explicit widths, the engine's
// default and the policy's width, leaving out classic and every arm that
// is not a measurement. With no such arm the span is 2–8, so the plot
// still has an x axis.
func plotSeries(rec *record.Record) svgSeries {
	var s svgSeries
	for i := range rec.Arms {
		a := &rec.Arms[i]
		if a.Kind == KindClassic || a.Status != record.StatusOK || a.Stats.N == 0 {
			continue
		}
		w := effWidth(a)
		if s.lo == 0 || w < s.lo {
			s.lo = w
		}
		if w > s.hi {
			s.hi = w
		}
		t := &s.widths
		switch a.Kind {
		case KindDefault:
			t = &s.def
		case KindPolicy:
			t = &s.pol
		}
		t.XYs = append(t.XYs, plotter.XY{X: float64(w), Y: a.Stats.Median})
		t.lo = append(t.lo, a.Stats.Median-a.Stats.Min)
		t.hi = append(t.hi, a.Stats.Max-a.Stats.Median)
		if a.SpeedupVsClassic > 0 {
			s.labels.XYs = append(s.labels.XYs, plotter.XY{X: float64(w), Y: a.Stats.Median})
			s.labels.Labels = append(s.labels.Labels, fmt.Sprintf("%.2fx", a.SpeedupVsClassic))
		}
	}
	if s.lo == 0 {
		s.lo, s.hi = 2, 8
	}
	return s
}

// addClassicBand draws classic's min–max as a band across the plot and
// its median as a dashed line: the bar every other arm is read against.
func addClassicBand(p *plot.Plot, leg *plot.Legend, rec *record.Record, x0, x1 float64) error {
	ci := classicIndex(rec)
	if ci < 0 || rec.Arms[ci].Stats.N == 0 {
		return nil
	}
	c := rec.Arms[ci].Stats
	band, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: c.Min}, {X: x1, Y: c.Min}, {X: x1, Y: c.Max}, {X: x0, Y: c.Max}})
	if err != nil {
		return fmt.Errorf("classic band: %w", err)
	}
	band.Color = color.NRGBA{R: 128, G: 128, B: 128, A: 64}
	band.LineStyle.Width = 0
	line, err := plotter.NewLine(plotter.XYs{{X: x0, Y: c.Median}, {X: x1, Y: c.Median}})
	if err != nil {
		return fmt.Errorf("classic median: %w", err)
	}
	line.Color = color.NRGBA{R: 90, G: 90, B: 90, A: 255}
	line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(band, line)
	leg.Add(fmt.Sprintf("classic %.1f (%.1f–%.1f)", c.Median, c.Min, c.Max), band, line)
	return nil
}

// addPoints draws one kind of arm as medians with min–max error bars.
func addPoints(p *plot.Plot, leg *plot.Legend, pts errPoints, name string, shape draw.GlyphDrawer, col color.Color) error {
	if len(pts.XYs) == 0 {
		return nil
	}
	bars, err := plotter.NewYErrorBars(pts)
	if err != nil {
		return fmt.Errorf("%s error bars: %w", name, err)
	}
	bars.Color = col
	sc, err := plotter.NewScatter(pts.XYs)
	if err != nil {
		return fmt.Errorf("%s points: %w", name, err)
	}
	sc.Shape, sc.Color, sc.Radius = shape, col, vg.Points(3)
	p.Add(bars, sc)
	leg.Add(name, sc)
	return nil
}

// addBest rings the verdict's best width, when there is one.
func addBest(p *plot.Plot, leg *plot.Legend, rec *record.Record) error {
	b := rec.Verdict.Best
	if b <= 0 {
		return nil
	}
	a := rec.Representative(b)
	if a == nil {
		return nil
	}
	ring, err := plotter.NewScatter(plotter.XYs{{X: float64(b), Y: a.Stats.Median}})
	if err != nil {
		return fmt.Errorf("best width: %w", err)
	}
	ring.Shape, ring.Color, ring.Radius = draw.RingGlyph{}, color.NRGBA{R: 255, G: 127, B: 14, A: 255}, vg.Points(7)
	p.Add(ring)
	leg.Add(fmt.Sprintf("best: width %d, %.1f (%.2fx)", b, a.Stats.Median, a.SpeedupVsClassic), ring)
	return nil
}

// addSpeedupLabels writes each arm's speedup over classic beside its point.
func addSpeedupLabels(p *plot.Plot, labels plotter.XYLabels) error {
	if len(labels.XYs) == 0 {
		return nil
	}
	lb, err := plotter.NewLabels(labels)
	if err != nil {
		return fmt.Errorf("speedup labels: %w", err)
	}
	for i := range lb.TextStyle {
		lb.TextStyle[i].Font = sans(8)
	}
	lb.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(2)}
	p.Add(lb)
	return nil
}

// drawSVG lays the plot and its legend side by side, so the legend never
// covers a point, and writes the SVG with a portable font family.
func drawSVG(p *plot.Plot, leg *plot.Legend) ([]byte, error) {
	c := vgsvg.New(svgW, svgH)
	dc := draw.New(c)
	p.Draw(draw.Crop(dc, 0, -svgLegendW, 0, 0))
	leg.Draw(draw.Crop(dc, svgW-svgLegendW+vg.Points(6), 0, 0, -vg.Points(30)))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("render svg: %w", err)
	}
	return []byte(strings.ReplaceAll(b.String(), "font-family:Liberation Sans", svgFontFamily)), nil
}

// widthTicks labels every whole width: widths are integers, and the
// default ticker would put marks at 2.5.
type widthTicks struct{}

func (widthTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	step := 1
	if max-min > 24 {
		step = 4
	}
	for w := int(min + 0.5); float64(w) <= max; w += step {
		if float64(w) >= min {
			ts = append(ts, plot.Tick{Value: float64(w), Label: fmt.Sprint(w)})
		}
	}
	return ts
}
