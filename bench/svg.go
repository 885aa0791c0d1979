package bench

import (
	"bytes"
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/speclaunch/speclaunch/record"
)

// errPoints are medians with their min–max as asymmetric error bars.
type errPoints struct {
	plotter.XYs
	lo, hi []float64 // distances below and above the median
}

func (e errPoints) YError(i int) (float64, float64) { return e.lo[i], e.hi[i] }

// RenderSVG plots tokens/s against width: classic's min–max as a shaded
// band with its median as a line, each measured arm's median with min–max
// error bars. Arms that are NOT A MEASUREMENT or failed are left out: a
// point on the plot reads as a measurement.
func RenderSVG(rec *record.Record) ([]byte, error) {
	p := plot.New()
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
	p.Y.Label.Text = "end-to-end tokens/s"

	var widths, def errPoints
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
		if a.Kind == KindDefault {
			t = &def
		}
		t.XYs = append(t.XYs, plotter.XY{X: float64(w), Y: a.Stats.Median})
		t.lo = append(t.lo, a.Stats.Median-a.Stats.Min)
		t.hi = append(t.hi, a.Stats.Max-a.Stats.Median)
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
		p.Legend.Add(fmt.Sprintf("classic %.1f (%.1f–%.1f)", c.Median, c.Min, c.Max), band, line)
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
		p.Legend.Add(name, sc)
		return nil
	}
	if err := add(widths, "width: median, min–max", draw.CircleGlyph{}, color.NRGBA{R: 31, G: 119, B: 180, A: 255}); err != nil {
		return nil, err
	}
	if err := add(def, "default arm", draw.SquareGlyph{}, color.NRGBA{R: 214, G: 39, B: 40, A: 255}); err != nil {
		return nil, err
	}
	p.X.Min, p.X.Max = x0, x1
	p.X.Tick.Marker = widthTicks{}
	p.Legend.Top = false
	p.Legend.Left = false

	wt, err := p.WriterTo(7*vg.Inch, 4.5*vg.Inch, "svg")
	if err != nil {
		return nil, fmt.Errorf("render svg: %w", err)
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("render svg: %w", err)
	}
	return b.Bytes(), nil
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
