package main

import (
	"fmt"
	"image/color"
	"strconv"

	"github.com/peerlimit/peerlimit/sim"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotReport draws admitted per window of the scenario's plot series (its
// first tier) for every policy, against the limit and the offered load,
// with the timeline's faults as vertical lines, and saves it to file (the
// format follows the extension). Only measured windows are drawn: complete
// ones, after the warm-up.
func plotReport(sc *sim.Scenario, rep *sim.Report, file string) error {
	if len(rep.Results) == 0 {
		return fmt.Errorf("sim: nothing to plot")
	}
	tier, period := "", 0.0
	for _, s := range sc.SLAs {
		if s.ID == sc.PlotSLA {
			tier = sc.PlotSLA + "/" + s.Tiers[0].Period.String()
			period = s.Tiers[0].Period.Seconds()
		}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s, tenant %s (seed %d)", sc.Name, tier, sc.PlotTenant, rep.Seed)
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "admitted per window"
	p.Legend.Top = false // bottom right: below the limit, where the lines rarely go
	p.Add(plotter.NewGrid())

	// Every window is drawn as a step over [start, end), with a marker in
	// its middle, so that a value lines up with the faults that shaped it.
	var limit, offered plotter.XYs
	ymax := 0.0
	for i, r := range rep.Results {
		var steps, mids plotter.XYs
		for _, w := range r.Windows {
			if w.Tenant != sc.PlotTenant || w.SLA != tier {
				continue
			}
			a := float64(w.Charged)
			steps = append(steps, plotter.XY{X: w.WindowStart, Y: a}, plotter.XY{X: w.WindowStart + period, Y: a})
			mids = append(mids, plotter.XY{X: w.WindowStart + period/2, Y: a})
			ymax = max(ymax, a, float64(w.Limit), float64(w.Offered))
			if i == 0 {
				limit = append(limit, plotter.XY{X: w.WindowStart, Y: float64(w.Limit)}, plotter.XY{X: w.WindowStart + period, Y: float64(w.Limit)})
				offered = append(offered, plotter.XY{X: w.WindowStart, Y: float64(w.Offered)}, plotter.XY{X: w.WindowStart + period, Y: float64(w.Offered)})
			}
		}
		if len(steps) == 0 {
			continue
		}
		l, err := plotter.NewLine(steps)
		if err != nil {
			return fmt.Errorf("sim: plot: %w", err)
		}
		s, err := plotter.NewScatter(mids)
		if err != nil {
			return fmt.Errorf("sim: plot: %w", err)
		}
		c := plotutil.Color(i)
		l.Color, s.Color = c, c
		l.Width = vg.Points(1.5)
		s.Shape = plotutil.Shape(i)
		s.Radius = vg.Points(3.5)
		p.Add(l, s)
		p.Legend.Add(string(r.Policy), l, s)
	}
	if len(limit) > 0 {
		l, err := plotter.NewLine(limit)
		if err != nil {
			return fmt.Errorf("sim: plot: %w", err)
		}
		l.Color = color.Black
		l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add("limit", l)
		o, err := plotter.NewLine(offered)
		if err != nil {
			return fmt.Errorf("sim: plot: %w", err)
		}
		o.Color = color.Gray{Y: 160}
		o.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(o)
		p.Legend.Add("offered", o)
	}
	ytop := ymax * 1.25
	if ytop == 0 {
		ytop = 1
	}
	p.Y.Min, p.Y.Max = 0, ytop
	p.X.Min, p.X.Max = 0, sc.Duration.Seconds()
	if period > 0 && sc.Duration.Seconds()/period <= 20 { // a tick per window
		var ticks []plot.Tick
		for x := 0.0; x <= sc.Duration.Seconds()+1e-9; x += period {
			ticks = append(ticks, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', -1, 64)})
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	for i, ev := range sc.Timeline {
		x := ev.At.Seconds()
		m, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: ytop}})
		if err != nil {
			return fmt.Errorf("sim: plot: %w", err)
		}
		m.Color = color.RGBA{R: 200, G: 60, B: 60, A: 255}
		m.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		p.Add(m)
		// Stagger labels so that close events stay readable.
		lb, err := plotter.NewLabels(plotter.XYLabels{
			XYs:    []plotter.XY{{X: x, Y: ytop * (0.97 - 0.06*float64(i%3))}},
			Labels: []string{ev.Text},
		})
		if err != nil {
			return fmt.Errorf("sim: plot: %w", err)
		}
		lb.TextStyle[0].Color = m.Color
		lb.Offset = vg.Point{X: vg.Points(2)}
		p.Add(lb)
	}
	if err := p.Save(10*vg.Inch, 4.5*vg.Inch, file); err != nil {
		return fmt.Errorf("sim: plot: %w", err)
	}
	return nil
}
