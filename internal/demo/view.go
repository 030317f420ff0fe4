package demo

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// ANSI sequences of the terminal view.
const (
	ansiHome  = "\x1b[H\x1b[2J"
	ansiBold  = "\x1b[1m"
	ansiRed   = "\x1b[31m"
	ansiGreen = "\x1b[32m"
	ansiDim   = "\x1b[2m"
	ansiReset = "\x1b[0m"
)

// Render writes one frame of the terminal view of snap. With ansi, it
// clears the screen first and uses colours; without, it writes plain text
// (for a log or a pipe).
func Render(w io.Writer, snap *Snapshot, ansi bool) {
	var b strings.Builder
	st := func(code, s string) string {
		if !ansi {
			return s
		}
		return code + s + ansiReset
	}
	if ansi {
		b.WriteString(ansiHome)
	} else {
		b.WriteString("---- " + snap.Time.Format("15:04:05") + " ----\n")
	}
	r := snap.Run
	load := fmt.Sprintf("%d tenants · %g req/s", r.Tenants, r.Rate)
	if r.Rate == 0 {
		load = "no built-in load"
	}
	fmt.Fprintf(&b, "%s · %d nodes · policy %s · sync %v · %s · limits %s    %s\n",
		st(ansiBold, "peerlimit demo-cluster"), r.Nodes, r.Policy, r.SyncInterval, load, r.Limits, snap.Time.Format("15:04:05"))
	line := "load " + loadText(snap.Load)
	if r.Dashboard != "" {
		line = "dashboard " + r.Dashboard + " · " + line
	}
	part := snap.Partition
	if part == "" {
		part = "none"
	}
	fmt.Fprintf(&b, "%s · partition %s\n\n", line, part)

	fmt.Fprintf(&b, "%-5s %-8s %-7s %-22s %-18s %7s %8s %8s %6s  %s\n",
		"NODE", "STATE", "PID", "URL", "MEMBERS (its view)", "SYNC/s", "OFFER/s", "ADMIT/s", "ERR/s", "ADDED µs p50/p95/p99")
	for _, n := range snap.Nodes {
		state := n.State
		switch {
		case n.State == StateUp && !n.Answering:
			state = "silent"
		case n.State == StateDown:
			state = st(ansiRed, fmt.Sprintf("%-8s", "down"))
		}
		members := "-"
		if n.Answering {
			members = strings.Join(n.Members, " ")
		}
		lat := "-"
		if n.Latency.Count > 0 {
			lat = fmt.Sprintf("%.0f / %.0f / %.0f", n.Latency.P50, n.Latency.P95, n.Latency.P99)
		}
		fmt.Fprintf(&b, "%-5s %-8s %-7d %-22s %-18s %7.1f %8.0f %8.0f %6.0f  %s\n",
			n.Name, state, n.PID, strings.TrimPrefix(n.URL, "http://"), members, n.SyncPerS, n.OfferedPerS, n.AdmittedPerS, n.ErrorsPerS, lat)
	}
	c := snap.Cluster
	fmt.Fprintf(&b, "%s offered %.0f/s · admitted %.0f/s · denied %.0f/s · errors %.0f/s · sync %.1f calls/s (%s/s) · added latency p50 %.0fµs p95 %.0fµs p99 %.0fµs\n",
		st(ansiBold, "cluster"), c.OfferedPerS, c.AdmittedPerS, c.DeniedPerS, c.ErrorsPerS, c.SyncPerS, byteSize(c.SyncBytesPerS),
		c.Latency.P50, c.Latency.P95, c.Latency.P99)

	if len(snap.Columns) > 0 && len(snap.Tenants) > 0 {
		b.WriteString("\n")
		renderTenants(&b, snap, st)
	}
	if len(snap.Events) > 0 {
		b.WriteString("\n")
		evs := snap.Events
		if len(evs) > 6 {
			evs = evs[len(evs)-6:]
		}
		for _, e := range evs {
			text := e.Text
			if len(text) > 150 {
				text = text[:150] + "…"
			}
			b.WriteString(st(ansiDim, e.Time.Format("15:04:05")+" "+text) + "\n")
		}
	}
	_, _ = io.WriteString(w, b.String())
}

func loadText(l LoadView) string {
	switch l.State {
	case LoadOff:
		return "off (-no-load)"
	case LoadWaiting:
		return fmt.Sprintf("starts in %.1fs (at a window boundary)", l.StartsIn)
	case LoadRunning:
		return fmt.Sprintf("running %.0fs (sent %d, dropped %d)", l.Elapsed, l.Sent, l.Dropped)
	}
	return fmt.Sprintf("done after %.0fs (sent %d, dropped %d)", l.Elapsed, l.Sent, l.Dropped)
}

func byteSize(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

const cellWidth = 50

func renderTenants(b *strings.Builder, snap *Snapshot, st func(code, s string) string) {
	// The current window of the first column, for the header.
	var cur time.Time
	var period float64
	for _, t := range snap.Tenants {
		if len(t.Cells) > 0 && t.Cells[0].Current != nil {
			cur, period = t.Cells[0].Current.Start, snap.Columns[0].PeriodS
			break
		}
	}
	if !cur.IsZero() {
		end := cur.Add(time.Duration(period * float64(time.Second)))
		left := fmt.Sprintf("%.1fs left", max(0, end.Sub(snap.Time).Seconds()))
		if snap.Load.State == LoadDone {
			left = "the last of the run"
		}
		fmt.Fprintf(b, "current window %s–%s (%s) · LAST = the window before, Δ = admitted − min(offered, limit)\n",
			cur.Format("15:04:05"), end.Format("15:04:05"), left)
	}
	fmt.Fprintf(b, "%-11s", "")
	for _, c := range snap.Columns {
		title := fmt.Sprintf("── %s (per %gs) ", c.Label, c.PeriodS)
		fmt.Fprintf(b, "  %s", title+strings.Repeat("─", max(0, cellWidth-len([]rune(title)))))
	}
	b.WriteString("\n")
	fmt.Fprintf(b, "%-11s", "TENANT")
	nodes := make([]string, len(snap.Nodes))
	for i, n := range snap.Nodes {
		nodes[i] = n.Name
	}
	split := strings.Join(nodes, "/")
	for range snap.Columns {
		fmt.Fprintf(b, "  %5s %7s %8s %-14s %12s", "LIMIT", "OFFERED", "ADMITTED", split, "LAST  Δ")
	}
	b.WriteString("\n")
	for _, t := range snap.Tenants {
		name := t.Tenant
		if t.Hot {
			name += " hot"
		}
		fmt.Fprintf(b, "%-11s", name)
		for _, c := range t.Cells {
			if c.Current == nil && c.Last == nil {
				fmt.Fprintf(b, "  %-*s", cellWidth, "-")
				continue
			}
			offered, admitted, per := "-", "-", "-"
			if w := c.Current; w != nil {
				offered, admitted = fmt.Sprint(w.Offered), fmt.Sprint(w.Admitted)
				per = joinInts(w.PerNode)
			}
			last := "-"
			if w := c.Last; w != nil {
				last = fmt.Sprintf("%d %+.1f%%", w.Admitted, w.DiffPct)
				if !w.Complete {
					last = fmt.Sprintf("%d (cut)", w.Admitted)
				}
			}
			pad := fmt.Sprintf("%12s", last)
			if w := c.Last; w != nil && w.Complete {
				switch {
				case w.DiffPct > 1:
					pad = st(ansiRed, pad)
				case c.Hot:
					pad = st(ansiGreen, pad)
				}
			}
			fmt.Fprintf(b, "  %5d %7s %8s %-14s %s", c.Limit, offered, admitted, per, pad)
		}
		b.WriteString("\n")
	}
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, "/")
}
