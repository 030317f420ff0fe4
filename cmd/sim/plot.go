package main

import (
	"fmt"
	"image/color"

	"github.com/peerlimit/peerlimit/sim"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotReport draws admitted per window of the scenario's plot series (its
// first tier) for every policy, against the limit and the offered load,
// with the timeline's faults as vertical lines, and saves it to file (the
// format follows the extension).
func plotReport(sc *sim.Scenario, rep *sim.Report, file string) error {
	if len(rep.Results) == 0 {
		return fmt.Errorf("sim: nothing to plot")
	}
	tier := ""
	for _, s := range sc.SLAs {
		if s.ID == sc.PlotSLA {
			tier = sc.PlotSLA + "/" + s.Tiers[0].Period.String()
		}
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s, tenant %s (seed %d)", sc.Name, tier, sc.PlotTenant, rep.Seed)
	p.X.Label.Text = "window start (s)"
	p.Y.Label.Text = "admitted per window"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())

	var limit, offered plotter.XYs
	ymax := 0.0
	for i, r := range rep.Results {
		var pts plotter.XYs
		for _, w := range r.Windows {
			if w.Tenant != sc.PlotTenant || w.SLA != tier {
				continue
			}
			pts = append(pts, plotter.XY{X: w.WindowStart, Y: float64(w.Admitted)})
			ymax = max(ymax, float64(w.Admitted), float64(w.Limit))
			if i == 0 {
				limit = append(limit, plotter.XY{X: w.WindowStart, Y: float64(w.Limit)})
				offered = append(offered, plotter.XY{X: w.WindowStart, Y: float64(w.Offered)})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("sim: plot: %w", err)
		}
		c := plotutil.Color(i)
		l.Color, s.Color = c, c
		s.Shape = plotutil.Shape(i)
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
