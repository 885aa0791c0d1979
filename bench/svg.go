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

	"github.com/speclaunch/speclaunch/record"
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

	var widths, def, pol errPoints
	var labels plotter.XYLabels
	lo, hi := 0, 0
	for i := range rec.Arms {
		a := &rec.Arms[i]
		if a.Kind == KindClassic || a.Status != record.StatusOK || a.Stats.N == 0 {
			continue
		}
		w := effWidth(a)
		if lo == 0 || w < lo {
			lo = w
		}
		if w > hi {
			hi = w
		}
		t := &widths
		switch a.Kind {
		case KindDefault:
			t = &def
		case KindPolicy:
			t = &pol
		}
		t.XYs = append(t.XYs, plotter.XY{X: float64(w), Y: a.Stats.Median})
		t.lo = append(t.lo, a.Stats.Median-a.Stats.Min)
		t.hi = append(t.hi, a.Stats.Max-a.Stats.Median)
		if a.SpeedupVsClassic > 0 {
			labels.XYs = append(labels.XYs, plotter.XY{X: float64(w), Y: a.Stats.Median})
			labels.Labels = append(labels.Labels, fmt.Sprintf("%.2fx", a.SpeedupVsClassic))
		}
	}
	if lo == 0 {
		lo, hi = 2, 8
	}
	x0, x1 := float64(lo)-0.5, float64(hi)+0.5

	if ci := classicIndex(rec); ci >= 0 && rec.Arms[ci].Stats.N > 0 {
		c := rec.Arms[ci].Stats
		band, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: c.Min}, {X: x1, Y: c.Min}, {X: x1, Y: c.Max}, {X: x0, Y: c.Max}})
		if err != nil {
			return nil, fmt.Errorf("classic band: %w", err)
		}
		band.Color = color.NRGBA{R: 128, G: 128, B: 128, A: 64}
		band.LineStyle.Width = 0
		line, err := plotter.NewLine(plotter.XYs{{X: x0, Y: c.Median}, {X: x1, Y: c.Median}})
		if err != nil {
			return nil, fmt.Errorf("classic median: %w", err)
		}
		line.Color = color.NRGBA{R: 90, G: 90, B: 90, A: 255}
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(band, line)
		leg.Add(fmt.Sprintf("classic %.1f (%.1f–%.1f)", c.Median, c.Min, c.Max), band, line)
	}
	add := func(pts errPoints, name string, shape draw.GlyphDrawer, col color.Color) error {
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
	if err := add(widths, "width: median, min–max", draw.CircleGlyph{}, color.NRGBA{R: 31, G: 119, B: 180, A: 255}); err != nil {
		return nil, err
	}
	if err := add(def, "engine's default", draw.SquareGlyph{}, color.NRGBA{R: 214, G: 39, B: 40, A: 255}); err != nil {
		return nil, err
	}
	if err := add(pol, "policy's width", draw.TriangleGlyph{}, color.NRGBA{R: 44, G: 160, B: 44, A: 255}); err != nil {
		return nil, err
	}
	if b := rec.Verdict.Best; b > 0 {
		if a := rec.Representative(b); a != nil {
			ring, err := plotter.NewScatter(plotter.XYs{{X: float64(b), Y: a.Stats.Median}})
			if err != nil {
				return nil, fmt.Errorf("best width: %w", err)
			}
			ring.Shape, ring.Color, ring.Radius = draw.RingGlyph{}, color.NRGBA{R: 255, G: 127, B: 14, A: 255}, vg.Points(7)
			p.Add(ring)
			leg.Add(fmt.Sprintf("best: width %d, %.1f (%.2fx)", b, a.Stats.Median, a.SpeedupVsClassic), ring)
		}
	}
	if len(labels.XYs) > 0 {
		lb, err := plotter.NewLabels(labels)
		if err != nil {
			return nil, fmt.Errorf("speedup labels: %w", err)
		}
		for i := range lb.TextStyle {
			lb.TextStyle[i].Font = sans(8)
		}
		lb.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(2)}
		p.Add(lb)
	}
	p.X.Min, p.X.Max = x0, x1+0.4 // room for the last speedup label
	p.X.Tick.Marker = widthTicks{}

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
