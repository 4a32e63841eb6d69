package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"regexp"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/tristore/tristore/bench"
)

// Figure is one plot of the page: an inline SVG and what it shows.
type Figure struct {
	Title   string
	Caption string
	SVG     string
	// Series are the legend entries, for tests and the page's alt text.
	Series []string
}

// sans is the face every text of a plot uses; the SVG names its family,
// and svgFonts adds fallbacks for a viewer that lacks Liberation.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = x, y
	p.Title.TextStyle.Font = font.From(sans, 13)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 11)
		a.Tick.Label.Font = font.From(sans, 9)
	}
	p.Legend.TextStyle.Font = font.From(sans, 9)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = 4, -4
	p.Add(plotter.NewGrid())
	return p
}

var (
	xmlProlog = regexp.MustCompile(`(?s)^<\?xml.*?\?>\s*(<!--.*?-->\s*)?`)
	svgFonts  = strings.NewReplacer("font-family:Liberation Sans;", "font-family:'Liberation Sans',Arimo,Arial,Helvetica,sans-serif;")
)

// render draws p as an SVG element ready to inline in HTML (no XML prolog;
// the font family with fallbacks, since fonts are not embedded: embedding
// would add ~400 KB a plot).
func render(p *plot.Plot, w, h vg.Length) (string, error) {
	c := vgsvg.New(w, h)
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", err
	}
	s := xmlProlog.ReplaceAllString(b.String(), "")
	return svgFonts.Replace(s), nil
}

func figure(p *plot.Plot, caption string, series []string) (Figure, error) {
	s, err := render(p, 5.2*vg.Inch, 3.6*vg.Inch)
	return Figure{Title: p.Title.Text, Caption: caption, SVG: s, Series: series}, err
}

// sizeTicks labels a log axis of sizes with the sizes themselves (4KiB,
// 1MiB, ...) rather than powers of ten.
type sizeTicks []int64

func (t sizeTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for _, s := range t {
		out = append(out, plot.Tick{Value: float64(s), Label: bench.FormatSize(s)})
	}
	return out
}

// intTicks labels an axis with given integers (thread counts).
type intTicks []int

func (t intTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for _, n := range t {
		out = append(out, plot.Tick{Value: float64(n), Label: fmt.Sprint(n)})
	}
	return out
}

// series names one line: the run's label (only when the plot holds several
// runs) and what distinguishes the line within the run.
func seriesName(runs []*Run, r *Run, what string) string {
	name := what
	if len(runs) > 1 || what == "" {
		name = strings.TrimSpace(r.Label + " " + what)
	}
	if r.Partial() {
		name += " (partial)"
	}
	return name
}

type line struct {
	name string
	xys  plotter.XYs
}

// addLines draws lines with points, one colour and glyph per series.
func addLines(p *plot.Plot, lines []line) ([]string, error) {
	var args []any
	var names []string
	for _, l := range lines {
		if len(l.xys) == 0 {
			continue
		}
		args = append(args, l.name, l.xys)
		names = append(names, l.name)
	}
	if len(args) == 0 {
		return nil, nil
	}
	return names, plotutil.AddLinePoints(p, args...)
}

// headroom leaves space above the data for the legend in the top corner.
func headroom(p *plot.Plot, n int) {
	p.Y.Min = 0
	p.Y.Max *= 1 + 0.08*float64(min(n, 10))
	if p.Y.Max <= 0 {
		p.Y.Max = 1
	}
}

func distinct[T int | int64 | string](rows []T) []T {
	out := slices.Clone(rows)
	slices.Sort(out)
	return slices.Compact(out)
}

// throughputVs plots MB/s of one phase against the size (units, single) or
// the thread count (batch); split names the lines within a run.
func throughputVs(runs []*Run, title, caption, phase string, byThreads bool, match func(Row) bool, split func(Row) string) (*Figure, error) {
	xlabel := "size"
	if byThreads {
		xlabel = "threads"
	}
	p := newPlot(title, xlabel, "MB/s")
	var lines []line
	var sizes []int64
	var threads []int
	for _, r := range runs {
		idx := map[string]int{}
		for _, row := range r.Rows {
			if row.Phase != phase || !match(row) || row.Ops == row.Errors {
				continue
			}
			name := seriesName(runs, r, split(row))
			i, ok := idx[name]
			if !ok {
				i = len(lines)
				idx[name] = i
				lines = append(lines, line{name: name})
			}
			x := float64(row.Unit)
			if byThreads {
				x = float64(row.Threads)
			}
			lines[i].xys = append(lines[i].xys, plotter.XY{X: x, Y: row.MBps})
			sizes, threads = append(sizes, row.Unit), append(threads, row.Threads)
		}
	}
	if len(sizes) == 0 {
		return nil, nil
	}
	for _, l := range lines {
		slices.SortFunc(l.xys, func(a, b plotter.XY) int { return cmpF(a.X, b.X) })
	}
	p.X.Scale = plot.LogScale{}
	if byThreads {
		p.X.Tick.Marker = intTicks(distinct(threads))
	} else {
		p.X.Tick.Marker = sizeTicks(distinct(sizes))
	}
	names, err := addLines(p, lines)
	if err != nil {
		return nil, err
	}
	headroom(p, len(names))
	// Room for the first and last tick labels on the log axis.
	p.X.Min, p.X.Max = p.X.Min/1.8, p.X.Max*1.8
	f, err := figure(p, caption, names)
	return &f, err
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// latencyCDF plots the cumulative distribution of request latency (ms, log
// axis) of one phase, a line per run and unit (seed 001 Figures 1–2).
func latencyCDF(runs []*Run, title, caption, phase string, threadsOf func(*Run) int) (*Figure, error) {
	p := newPlot(title, "latency (ms)", "fraction of requests ≤ latency")
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	var lines []line
	for _, r := range runs {
		t := threadsOf(r)
		var units []int64
		for _, row := range r.Rows {
			if row.Phase == phase && row.Threads == t {
				units = append(units, row.Unit)
			}
		}
		for _, u := range pickEven(distinct(units), max(3, 12/len(runs))) {
			var lat []float64
			for _, row := range r.Rows {
				if row.Phase == phase && row.Unit == u && row.Threads == t {
					for _, d := range r.Latencies(row.Phase, row.Form, u, t) {
						lat = append(lat, max(float64(d)/1e6, 1e-3))
					}
				}
			}
			if len(lat) == 0 {
				continue
			}
			slices.Sort(lat)
			xys := make(plotter.XYs, 0, len(lat)+2)
			xys = append(xys, plotter.XY{X: lat[0], Y: 0})
			// At most ~200 points a line: the SVG stays small for runs of
			// 80,000 requests and the curve's shape is kept.
			step := max(1, len(lat)/200)
			for i := 0; i < len(lat); i += step {
				xys = append(xys, plotter.XY{X: lat[i], Y: float64(i+1) / float64(len(lat))})
			}
			if xys[len(xys)-1].Y < 1 {
				xys = append(xys, plotter.XY{X: lat[len(lat)-1], Y: 1})
			}
			what := bench.FormatSize(u)
			if t > 1 {
				what += fmt.Sprintf(" ×%d", t)
			}
			lines = append(lines, line{name: seriesName(runs, r, what), xys: xys})
		}
	}
	if len(lines) == 0 {
		return nil, nil
	}
	var args []any
	var names []string
	for _, l := range lines {
		args = append(args, l.name, l.xys)
		names = append(names, l.name)
	}
	if err := plotutil.AddLines(p, args...); err != nil {
		return nil, err
	}
	// The legend sits above the 1.0 line, clear of the curves.
	p.Y.Min, p.Y.Max = 0, 1+0.075*float64(min(len(names), 12))
	p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 0.25, Label: "0.25"},
		{Value: 0.5, Label: "0.5"}, {Value: 0.75, Label: "0.75"}, {Value: 1, Label: "1"}})
	// Padding keeps the log axis valid when every request took the same
	// time (plot would widen a zero range to [x-1, x+1], below zero).
	p.X.Min, p.X.Max = p.X.Min/1.2, p.X.Max*1.2
	f, err := figure(p, caption, names)
	return &f, err
}

// heatGrid is MB/s over (size index, threads index).
type heatGrid struct {
	z [][]float64 // [size][threads]
}

func (g heatGrid) Dims() (c, r int)   { return len(g.z), len(g.z[0]) }
func (g heatGrid) Z(c, r int) float64 { return g.z[c][r] }
func (g heatGrid) X(c int) float64    { return float64(c) }
func (g heatGrid) Y(r int) float64    { return float64(r) }
func (g heatGrid) Min() float64       { return g.ext(math.Min, math.Inf(1)) }
func (g heatGrid) Max() float64       { return g.ext(math.Max, math.Inf(-1)) }
func (g heatGrid) ext(f func(a, b float64) float64, v float64) float64 {
	for _, col := range g.z {
		for _, z := range col {
			if !math.IsNaN(z) {
				v = f(v, z)
			}
		}
	}
	return v
}

// heatMap is seed 001's bandwidth over object size × parallelism for one
// run and phase, each cell labelled with its MB/s.
func heatMap(r *Run, phase string) (*Figure, error) {
	var sizes []int64
	var threads []int
	for _, row := range r.Rows {
		if row.Phase == phase {
			sizes, threads = append(sizes, row.Unit), append(threads, row.Threads)
		}
	}
	sizes, threads = distinct(sizes), distinct(threads)
	if len(sizes) == 0 {
		return nil, nil
	}
	g := heatGrid{z: make([][]float64, len(sizes))}
	for i := range g.z {
		g.z[i] = make([]float64, len(threads))
		for j := range g.z[i] {
			g.z[i][j] = math.NaN()
		}
	}
	var lab plotter.XYLabels
	for _, row := range r.Rows {
		if row.Phase != phase {
			continue
		}
		i, j := slices.Index(sizes, row.Unit), slices.Index(threads, row.Threads)
		g.z[i][j] = row.MBps
		lab.XYs = append(lab.XYs, plotter.XY{X: float64(i), Y: float64(j)})
		lab.Labels = append(lab.Labels, fmt.Sprintf("%.3g", row.MBps))
	}
	title := fmt.Sprintf("%s bandwidth (MB/s): %s", phase, r.Label)
	if r.Partial() {
		title += " (partial)"
	}
	p := newPlot(title, "object size", "parallelism")
	hm := plotter.NewHeatMap(g, lightRamp(64))
	hm.NaN = color.White
	p.Add(hm)
	labels, err := plotter.NewLabels(lab)
	if err != nil {
		return nil, err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].Font = font.From(sans, 9)
		labels.TextStyle[i].XAlign, labels.TextStyle[i].YAlign = draw.XCenter, draw.YCenter
	}
	p.Add(labels)
	var xt, yt []plot.Tick
	for i, s := range sizes {
		xt = append(xt, plot.Tick{Value: float64(i), Label: bench.FormatSize(s)})
	}
	for j, t := range threads {
		yt = append(yt, plot.Tick{Value: float64(j), Label: fmt.Sprint(t)})
	}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.ConstantTicks(xt), plot.ConstantTicks(yt)
	p.X.Min, p.X.Max = -0.5, float64(len(sizes))-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(len(threads))-0.5
	f, err := figure(p, "darker = more bandwidth; white = not measured", []string{r.Label})
	return &f, err
}

// bars draws grouped bars: one group per category, one bar per series.
func bars(title, ylabel, caption string, cats []string, series []string, val func(s, c int) float64) (*Figure, error) {
	p := newPlot(title, "", ylabel)
	n := len(series)
	w := vg.Points(min(18, 220/float64(max(1, n*len(cats)))+4))
	var names []string
	for s := range series {
		v := make(plotter.Values, len(cats))
		for c := range cats {
			v[c] = val(s, c)
		}
		b, err := plotter.NewBarChart(v, w)
		if err != nil {
			return nil, err
		}
		b.LineStyle.Width = 0
		b.Color = barColor(s)
		b.Offset = vg.Length(float64(s)-float64(n-1)/2) * w
		p.Add(b)
		p.Legend.Add(series[s], b)
		names = append(names, series[s])
	}
	p.NominalX(cats...)
	headroom(p, n)
	f, err := figure(p, caption, names)
	return &f, err
}

// barPalette has twelve distinguishable colours (ColorBrewer's Paired,
// reordered so neighbours differ): plotutil's seven repeat within one
// amplification chart (a bar per protocol and access form).
var barPalette = []color.RGBA{
	{31, 120, 180, 255}, {227, 26, 28, 255}, {51, 160, 44, 255}, {255, 127, 0, 255}, {106, 61, 154, 255}, {177, 89, 40, 255},
	{166, 206, 227, 255}, {251, 154, 153, 255}, {178, 223, 138, 255}, {253, 191, 111, 255}, {202, 178, 214, 255}, {120, 120, 120, 255},
}

func barColor(i int) color.Color { return barPalette[i%len(barPalette)] }

// wireBars is seed 004's transmission efficiency (payload ÷ wire) or seed
// 000's amplification (wire ÷ payload) per unit, a bar per run and phase.
func wireBars(runs []*Run, efficiency bool) (*Figure, error) {
	type sk struct {
		r     *Run
		phase string
		form  string
	}
	var cats []int64
	var series []sk
	seen := map[sk]bool{}
	for _, r := range runs {
		for _, row := range r.Rows {
			if row.Wire() == 0 || row.Payload == 0 {
				continue
			}
			cats = append(cats, row.Unit)
			k := sk{r, row.Phase, row.Form}
			if !seen[k] {
				seen[k] = true
				series = append(series, k)
			}
		}
	}
	if len(series) == 0 {
		return nil, nil
	}
	cats = distinct(cats)
	var catNames, names []string
	for _, c := range cats {
		catNames = append(catNames, bench.FormatSize(c))
	}
	for _, s := range series {
		what := s.phase
		if s.form != "" && s.form != "default" {
			what += " " + s.form
		}
		names = append(names, seriesName(runs, s.r, what))
	}
	title, ylabel, caption := "wire amplification", "wire bytes ÷ payload", "bytes crossing the link both ways (TCP payload) per payload byte; 1 = no overhead"
	if efficiency {
		title, ylabel, caption = "transmission efficiency", "payload ÷ wire bytes", "payload bytes per byte crossing the link both ways (TCP payload); 1 = no overhead"
	}
	return bars(title, ylabel, caption, catNames, names, func(s, c int) float64 {
		k := series[s]
		for _, row := range k.r.Rows {
			if row.Phase == k.phase && row.Form == k.form && row.Unit == cats[c] && row.Wire() > 0 {
				if efficiency {
					return row.Efficiency
				}
				return row.Amplification
			}
		}
		return 0
	})
}

// phaseBars shows one figure of merit per phase, a bar per run: fops of
// the metadata suite, MB/s of datasize and of suites without a figure of
// their own.
func phaseBars(runs []*Run, title, ylabel string, val func(Row) float64, skip func(Row) bool) (*Figure, error) {
	var cats []string
	for _, r := range runs {
		for _, row := range r.Rows {
			if !skip(row) && !slices.Contains(cats, row.Phase) {
				cats = append(cats, row.Phase)
			}
		}
	}
	if len(cats) == 0 {
		return nil, nil
	}
	var names []string
	for _, r := range runs {
		names = append(names, seriesName(runs, r, ""))
	}
	return bars(title, ylabel, "per phase, the best (size, threads) group of the phase", cats, names, func(s, c int) float64 {
		var best float64
		for _, row := range runs[s].Rows {
			if row.Phase == cats[c] && !skip(row) {
				best = max(best, val(row))
			}
		}
		return best
	})
}

// ramp is a sequential palette from pale yellow to orange-red: light
// enough everywhere for the black cell labels to stay readable.
type ramp []color.Color

func (r ramp) Colors() []color.Color { return r }

func lightRamp(n int) palette.Palette {
	from, to := [3]float64{255, 247, 220}, [3]float64{232, 110, 50}
	r := make(ramp, n)
	for i := range r {
		t := float64(i) / float64(max(1, n-1))
		c := func(k int) uint8 { return uint8(from[k] + (to[k]-from[k])*t + 0.5) }
		r[i] = color.RGBA{c(0), c(1), c(2), 255}
	}
	return r
}

// pickEven keeps at most k of vs, the first, the last and evenly spaced
// ones between, so a CDF of many sizes × many runs stays legible (the
// tables keep every size).
func pickEven[T any](vs []T, k int) []T {
	if len(vs) <= k || k < 2 {
		return vs
	}
	out := make([]T, 0, k)
	for i := range k {
		out = append(out, vs[i*(len(vs)-1)/(k-1)])
	}
	return out
}
