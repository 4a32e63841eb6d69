package memsoak

import (
	"bytes"
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

// Plot writes an SVG of RSS (and the Go heap in use), goroutines and open
// descriptors over time, one panel each, the load's start and end marked.
func (res *Result) Plot(path, title string) error {
	if len(res.Samples) == 0 {
		return fmt.Errorf("no samples")
	}
	t0 := res.Samples[0].T
	var loadFrom, loadTo float64 = -1, -1
	for _, s := range res.Samples {
		if s.Phase == "load" {
			if loadFrom < 0 {
				loadFrom = (s.T - t0) / 60
			}
			loadTo = (s.T - t0) / 60
		}
	}
	series := func(f func(Sample) float64) plotter.XYs {
		xy := make(plotter.XYs, len(res.Samples))
		for i, s := range res.Samples {
			xy[i].X, xy[i].Y = (s.T-t0)/60, f(s)
		}
		return xy
	}
	mk := func(ylabel string, lines []struct {
		name string
		xy   plotter.XYs
		c    color.Color
	}, top bool) (*plot.Plot, error) {
		p := plot.New()
		if top {
			p.Title.Text = title
			p.Title.TextStyle.Font = font.From(sans, 12)
		}
		p.X.Label.Text, p.Y.Label.Text = "minutes since the server started", ylabel
		for _, a := range []*plot.Axis{&p.X, &p.Y} {
			a.Label.TextStyle.Font = font.From(sans, 10)
			a.Tick.Label.Font = font.From(sans, 9)
		}
		p.Legend.TextStyle.Font = font.From(sans, 9)
		p.Legend.Top, p.Legend.Left = true, false
		p.Add(plotter.NewGrid())
		p.Y.Min = 0
		ymax := 0.0
		for _, l := range lines {
			ln, err := plotter.NewLine(l.xy)
			if err != nil {
				return nil, err
			}
			ln.Color = l.c
			ln.Width = vg.Points(1.2)
			p.Add(ln)
			p.Legend.Add(l.name, ln)
			for _, v := range l.xy {
				ymax = max(ymax, v.Y)
			}
		}
		p.Y.Max = ymax * 1.25
		for _, x := range []float64{loadFrom, loadTo} {
			if x < 0 {
				continue
			}
			m, _ := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: p.Y.Max}})
			m.Color = color.Gray{Y: 150}
			m.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
			p.Add(m)
		}
		return p, nil
	}
	type L = struct {
		name string
		xy   plotter.XYs
		c    color.Color
	}
	blue, orange, green, red := color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255}, color.RGBA{214, 39, 40, 255}
	p1, err := mk("MiB", []L{
		{"server RSS (VmRSS)", series(func(s Sample) float64 { return mib(s.RSSKiB) }), blue},
		{"Go heap in use", series(func(s Sample) float64 { return float64(s.HeapInuse) / (1 << 20) }), orange},
	}, true)
	if err != nil {
		return err
	}
	p2, err := mk("goroutines", []L{{"goroutines", series(func(s Sample) float64 { return float64(s.Goroutines) }), green}}, false)
	if err != nil {
		return err
	}
	p3, err := mk("descriptors", []L{{"open fds", series(func(s Sample) float64 { return float64(s.FDs) }), red}}, false)
	if err != nil {
		return err
	}
	w, h := 8*vg.Inch, 9*vg.Inch
	c := vgsvg.New(w, h)
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadY: vg.Points(6), PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	plots := [][]*plot.Plot{{p1}, {p2}, {p3}}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
