package demo

import (
	"strings"
	"testing"
	"time"
)

func TestRender(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	win := now.Truncate(10 * time.Second)
	snap := &Snapshot{
		Time:      now,
		Run:       RunInfo{Policy: "lease", SyncInterval: 200 * time.Millisecond, Nodes: 2, Tenants: 2, Rate: 100, Limits: "seed", Dashboard: "http://127.0.0.1:8080"},
		Load:      LoadView{State: LoadRunning, Elapsed: 12, GenStats: GenStats{Sent: 1200}},
		Partition: "n1|n2",
		Nodes: []NodeView{
			{ProcStatus: ProcStatus{Name: "n1", URL: "http://127.0.0.1:1", State: StateUp, PID: 11}, Answering: true, Members: []string{"n1"}, Latency: Quantiles{P50: 5, P95: 20, P99: 90, Count: 3}},
			{ProcStatus: ProcStatus{Name: "n2", URL: "http://127.0.0.1:2", State: StateDown, PID: 12}},
		},
		Columns: []Column{{SLA: "get-product", PeriodS: 10, Label: "get-product"}},
		Tenants: []TenantView{
			{Tenant: "org-01", Hot: true, Cells: []TenantCell{{Limit: 1000, Hot: true,
				Current: &WindowView{Start: win, Offered: 700, Admitted: 650, PerNode: []int64{400, 250}},
				Last:    &WindowView{Start: win.Add(-10 * time.Second), Offered: 2000, Admitted: 1020, Diff: 20, DiffPct: 2, Complete: true}}}},
			{Tenant: "org-02", Cells: []TenantCell{{}}},
		},
		Events: []Event{{Time: now, Text: "n2 | killed"}},
	}
	for _, ansi := range []bool{false, true} {
		var b strings.Builder
		Render(&b, snap, ansi)
		out := b.String()
		for _, want := range []string{
			"2 nodes · policy lease · sync 200ms · 2 tenants · 100 req/s",
			"dashboard http://127.0.0.1:8080 · load running 12s (sent 1200, dropped 0) · partition n1|n2",
			"5 / 20 / 90", "down", "org-01 hot", "650", "400/250", "1020 +2.0%", "n2 | killed",
			"current window 03:04:00–03:04:10 (5.0s left)",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("ansi=%v: output lacks %q:\n%s", ansi, want, out)
			}
		}
		if got := strings.Contains(out, ansiHome); got != ansi {
			t.Errorf("ansi=%v: clear-screen sequence present = %v", ansi, got)
		}
		if ansi && !strings.Contains(out, ansiRed+"  1020 +2.0%") {
			t.Errorf("an overshoot above 1%% is not red:\n%q", out)
		}
	}
}
