package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// 5. Two instances with the same name, seeds pointing at each other: the
// first starts alone; the second's Start meets the first and fails with an
// error naming the conflict, so it never admits; the first reports the
// conflict loudly. (Before: both started, formed two clusters and each
// admitted the whole limit.)
func TestNameConflictRefusedAtStart(t *testing.T) {
	seedOfFirst, port := freeAddr(t)
	cfg := LocalConfig("api")
	cfg.Gossip.Seeds = []string{seedOfFirst} // where the second will be
	first, firstLogs := startLogged(t, cfg)

	cfg = LocalConfig("api")
	cfg.Gossip.BindPort = port
	cfg.Gossip.Seeds = []string{first.GossipAddr()}
	second, _, err := tryStart(t, cfg)
	if err == nil {
		t.Fatal("a second node with a taken name started")
	}
	if strings.Contains(err.Error(), "listen on") {
		t.Skipf("could not bind the reserved port again: %v", err)
	}
	if !errors.Is(err, ErrNameConflict) || !strings.Contains(err.Error(), first.GossipAddr()) || !strings.Contains(err.Error(), "Config.Name") {
		t.Fatalf("second Start = %v, want ErrNameConflict naming %s and Config.Name", err, first.GossipAddr())
	}
	t.Logf("second Start: %v", err)
	l := counters.Limit{Tenant: "t", Endpoint: "/p", Method: "GET", Period: time.Minute, Threshold: 100}
	if _, err := second.Allow(context.Background(), l); !errors.Is(err, ErrClosed) {
		t.Errorf("after a failed Start, Allow = %v, want ErrClosed", err)
	}

	reportsLoudly(t, first, firstLogs, ErrNameConflict, "name_conflict", "name conflict")
	if got := metricValue(t, first.Registry(), "peerlimit_name_conflicts_total", "whose", "self"); got < 1 {
		t.Errorf("peerlimit_name_conflicts_total{whose=self} = %v, want >= 1", got)
	}
	t.Logf("first node's Health: %v", first.Health())
}

// 5, later: the conflict can only show after Start — the second starts
// alone (its seed is not up yet), the first starts later at that address
// without seeds. When the rejoin loop brings them together, both report
// it within seconds.
func TestNameConflictAfterStartReported(t *testing.T) {
	seed, port := freeAddr(t)
	cfg := LocalConfig("api")
	cfg.Gossip.Seeds = []string{seed}
	early, earlyLogs := startLogged(t, cfg)

	cfg = LocalConfig("api")
	cfg.Gossip.BindPort = port
	late, lateLogs, err := tryStart(t, cfg)
	if err != nil {
		t.Skipf("could not start on the reserved port: %v", err)
	}
	start := time.Now()
	reportsLoudly(t, early, earlyLogs, ErrNameConflict, "name_conflict", "name conflict")
	reportsLoudly(t, late, lateLogs, ErrNameConflict, "name_conflict", "name conflict")
	t.Logf("both reported the conflict within %v: %v", time.Since(start).Round(time.Millisecond), late.Health())
}
