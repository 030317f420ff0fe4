package demo

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// Outcome is what became of one generated request.
type Outcome uint8

const (
	Admitted Outcome = iota // 2xx
	Denied                  // 429
	Failed                  // any other status, or no response
)

// NodeCounts counts requests by outcome.
type NodeCounts struct {
	Offered  int64 `json:"offered"`
	Admitted int64 `json:"admitted"`
	Denied   int64 `json:"denied"`
	Errors   int64 `json:"errors"`
}

func (c *NodeCounts) add(o Outcome) {
	c.Offered++
	switch o {
	case Admitted:
		c.Admitted++
	case Denied:
		c.Denied++
	default:
		c.Errors++
	}
}

// WindowKey identifies one window of one tier of one SLA for one tenant:
// the ground-truth twin of a limiter counter.
type WindowKey struct {
	Tenant string
	SLA    string
	Period time.Duration
	Start  int64 // window start, Unix nanoseconds (aligned as the limiter aligns it)
}

// Window is the ground truth of one window: what the load generator
// offered and what the cluster admitted, in total and per node.
type Window struct {
	WindowKey
	Limit  int64
	Shadow bool
	NodeCounts
	PerNode []NodeCounts // by node index
}

// End returns the window's end.
func (w *Window) End() time.Time { return time.Unix(0, w.Start+int64(w.Period)) }

// Truth is the load generator's ground truth: every request it sent, by
// window and by node. The zero value is not usable; call NewTruth. It is
// safe for concurrent use.
type Truth struct {
	mu      sync.Mutex
	nodes   int
	windows map[WindowKey]*Window
	perNode []NodeCounts
	total   NodeCounts
}

// maxWindows bounds the windows kept; beyond it the oldest are dropped
// (about 40 hours of the default demo).
const maxWindows = 200000

// NewTruth returns an empty Truth for a cluster of nodes nodes.
func NewTruth(nodes int) *Truth {
	return &Truth{nodes: nodes, windows: map[WindowKey]*Window{}, perNode: make([]NodeCounts, nodes)}
}

// Record counts one request of stream s, sent to node, decided at at (the
// node's clock just before the limiter ran, or the client's when there was
// no response), with outcome o.
func (t *Truth) Record(s *Stream, node int, at time.Time, o Outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total.add(o)
	if node >= 0 && node < t.nodes {
		t.perNode[node].add(o)
	}
	ns := at.UnixNano()
	for _, sla := range s.SLAs {
		for _, tier := range sla.Tiers {
			k := WindowKey{Tenant: sla.Tenant, SLA: sla.ID, Period: tier.Period, Start: counters.WindowStart(ns, int64(tier.Period))}
			w := t.windows[k]
			if w == nil {
				if len(t.windows) >= maxWindows {
					t.dropOldest()
				}
				w = &Window{WindowKey: k, Limit: tier.Threshold, Shadow: sla.Shadow, PerNode: make([]NodeCounts, t.nodes)}
				t.windows[k] = w
			}
			w.add(o)
			if node >= 0 && node < t.nodes {
				w.PerNode[node].add(o)
			}
		}
	}
}

func (t *Truth) dropOldest() {
	oldest := int64(0)
	first := true
	for k := range t.windows {
		if first || k.Start < oldest {
			oldest, first = k.Start, false
		}
	}
	for k := range t.windows {
		if k.Start == oldest {
			delete(t.windows, k)
		}
	}
}

// Totals returns the counts of every request, and per node.
func (t *Truth) Totals() (total NodeCounts, perNode []NodeCounts) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total, slices.Clone(t.perNode)
}

// Windows returns a copy of the windows that end after since (all of them
// for the zero time), sorted by tenant, SLA, period and start.
func (t *Truth) Windows(since time.Time) []Window {
	t.mu.Lock()
	out := make([]Window, 0, len(t.windows))
	for _, w := range t.windows {
		if since.IsZero() || w.End().After(since) {
			c := *w
			c.PerNode = slices.Clone(w.PerNode)
			out = append(out, c)
		}
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b Window) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.SLA, b.SLA),
			cmp.Compare(a.Period, b.Period), cmp.Compare(a.Start, b.Start))
	})
	return out
}
