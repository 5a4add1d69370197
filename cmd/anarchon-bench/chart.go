package main

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// series is one set of bars of a grouped bar chart.
type series struct {
	name   string
	values plotter.Values
	color  color.Color
}

var (
	blue   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	orange = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	green  = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
)

// barPlot is a grouped bar chart: one group per label, one bar per series.
func barPlot(title, ylabel string, labels []string, ss []series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	w := vg.Points(12)
	for i, s := range ss {
		bars, err := plotter.NewBarChart(s.values, w)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		bars.LineStyle.Width = 0
		bars.Color = s.color
		bars.Offset = w * vg.Length(float64(i)-float64(len(ss)-1)/2)
		p.Add(bars)
		p.Legend.Add(s.name, bars)
	}
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = 0.5
	p.X.Tick.Label.XAlign = draw.XRight
	return p, nil
}

// writeChart draws the claim latency beside the raw round trip per backend,
// and the start lag p99 of the daemons beside the baseline forker per
// backend and load, into one PNG.
func writeChart(path string, rep jsonReport) error {
	var plots []*plot.Plot
	for _, c := range chartsOf(rep) {
		if len(c.labels) == 0 {
			continue
		}
		p, err := barPlot(c.title, c.unit, c.labels, c.series)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	if len(plots) == 0 {
		return nil
	}
	return writePlots(path, plots)
}

// chart is one plot of the PNG: a grouped bar chart with its title, unit
// and groups.
type chart struct {
	title, unit string
	labels      []string
	series      []series
}

// chartsOf is rep's two charts: the claim latency p50 beside the raw round
// trip (µs) of the backends with claims, and the start lag p99 of the
// daemons beside the forker (ms) of the loads measured without error. A
// chart with no labels is not drawn.
func chartsOf(rep jsonReport) []chart {
	var labels []string
	claim50, raw50 := plotter.Values{}, plotter.Values{}
	var lagLabels []string
	daemon99, forker99 := plotter.Values{}, plotter.Values{}
	for _, b := range rep.Backends {
		if b.Claims > 0 {
			labels = append(labels, b.Name)
			claim50 = append(claim50, b.ClaimP50)
			raw50 = append(raw50, b.RawP50)
		}
		for _, l := range b.Lag {
			if l.Err != "" || l.Runs == 0 {
				continue
			}
			lagLabels = append(lagLabels, fmt.Sprintf("%s %d/s", b.Name, l.Load))
			daemon99 = append(daemon99, float64(l.DaemonP99.Microseconds())/1000)
			forker99 = append(forker99, float64(l.ForkerP99.Microseconds())/1000)
		}
	}
	return []chart{
		{"claim latency p50 beside the store's raw round trip", "µs", labels,
			[]series{{"claim", claim50, blue}, {"raw round trip", raw50, orange}}},
		{"start lag p99: 3 daemons beside the baseline forker", "ms", lagLabels,
			[]series{{"anarchond", daemon99, blue}, {"baseline forker", forker99, green}}},
	}
}

// writePlots draws plots one above the other, each a tile of the same
// size, into a PNG at path.
func writePlots(path string, plots []*plot.Plot) error {
	const width, tileHeight = 22 * vg.Centimeter, 11 * vg.Centimeter
	img := vgimg.New(width, tileHeight*vg.Length(len(plots)))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	grid := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		grid[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(grid, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
