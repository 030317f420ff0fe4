package demo

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// Load states shown in the views.
const (
	LoadOff     = "off"     // -no-load
	LoadWaiting = "waiting" // waiting for the first window boundary
	LoadRunning = "running"
	LoadDone    = "done"
)

// RunInfo describes the run, for the views and the report.
type RunInfo struct {
	Policy       string        `json:"policy"`
	SyncInterval time.Duration `json:"-"`
	SyncMs       float64       `json:"sync_interval_ms"`
	Nodes        int           `json:"nodes"`
	Tenants      int           `json:"tenants"`
	Rate         float64       `json:"rate"`    // configured requests per second
	Clients      string        `json:"clients"` // how the load reaches the nodes (LoadConfig.Clients)
	Limits       string        `json:"limits"`
	Dashboard    string        `json:"dashboard"` // URL, "" if none
	Started      time.Time     `json:"started"`
}

// Snapshot is everything the terminal view and the dashboard show, built
// once per second by the Monitor.
type Snapshot struct {
	Time      time.Time     `json:"time"`
	Run       RunInfo       `json:"run"`
	Load      LoadView      `json:"load"`
	Partition string        `json:"partition"`
	Nodes     []NodeView    `json:"nodes"`
	Cluster   ClusterView   `json:"cluster"`
	Columns   []Column      `json:"columns"`
	Tenants   []TenantView  `json:"tenants"`
	Series    []Point       `json:"series"`
	Events    []Event       `json:"events"`
	Faults    []FaultResult `json:"faults,omitempty"`
}

// LoadView is the load generator's state.
type LoadView struct {
	State    string  `json:"state"`
	StartsIn float64 `json:"starts_in_s"` // while waiting
	Elapsed  float64 `json:"elapsed_s"`   // since the load started
	GenStats
}

// NodeView is one node as the supervisor and the node itself see it.
type NodeView struct {
	ProcStatus
	Answering bool      `json:"answering"` // /admin/state answered this second
	Members   []string  `json:"members"`
	Partition string    `json:"partition"`
	SyncCalls uint64    `json:"sync_calls"`
	SyncBytes uint64    `json:"sync_bytes"`
	SyncPerS  float64   `json:"sync_calls_per_s"`
	Latency   Quantiles `json:"latency_us"` // over the last interval
	Served    uint64    `json:"served"`
	Limited   uint64    `json:"limited"`
	// Ground truth for this node, per second over the last interval.
	OfferedPerS  float64 `json:"offered_per_s"`
	AdmittedPerS float64 `json:"admitted_per_s"`
	ErrorsPerS   float64 `json:"errors_per_s"`
}

// ClusterView sums the nodes.
type ClusterView struct {
	OfferedPerS   float64    `json:"offered_per_s"`
	AdmittedPerS  float64    `json:"admitted_per_s"`
	DeniedPerS    float64    `json:"denied_per_s"`
	ErrorsPerS    float64    `json:"errors_per_s"`
	SyncPerS      float64    `json:"sync_calls_per_s"`
	SyncBytesPerS float64    `json:"sync_bytes_per_s"`
	SyncCalls     uint64     `json:"sync_calls"` // since the cluster started, every incarnation
	SyncBytes     uint64     `json:"sync_bytes"`
	Latency       Quantiles  `json:"latency_us"`       // over the last interval
	LatencyTotal  Quantiles  `json:"latency_total_us"` // since the start
	Totals        NodeCounts `json:"totals"`
}

// Column is one (SLA, tier) of the tenant table.
type Column struct {
	SLA     string  `json:"sla"`
	PeriodS float64 `json:"period_s"`
	Label   string  `json:"label"`
}

// TenantView is one tenant's row: a cell per column.
type TenantView struct {
	Tenant string       `json:"tenant"`
	Hot    bool         `json:"hot"`
	Cells  []TenantCell `json:"cells"` // by column; Limit 0 and no windows when the tenant does not use it
}

// TenantCell is one tenant on one (SLA, tier): the current window and the
// last complete one.
type TenantCell struct {
	Limit      int64       `json:"limit"`
	TargetRate float64     `json:"target_rate"` // requests per second the generator aims at
	Hot        bool        `json:"hot"`
	Current    *WindowView `json:"current,omitempty"`
	Last       *WindowView `json:"last,omitempty"`
}

// WindowView is one window's ground truth. Diff is admitted minus what an
// exact limiter would admit (min(offered, limit)): > 0 is an overshoot,
// < 0 an undershoot.
type WindowView struct {
	Start    time.Time `json:"start"`
	Offered  int64     `json:"offered"`
	Admitted int64     `json:"admitted"`
	Denied   int64     `json:"denied"`
	Errors   int64     `json:"errors"`
	PerNode  []int64   `json:"per_node"` // admitted, by node
	Diff     int64     `json:"diff"`
	DiffPct  float64   `json:"diff_pct"` // Diff as a % of the limit
	Complete bool      `json:"complete"`
}

// Point is one second of the time series.
type Point struct {
	T            float64   `json:"t"` // Unix seconds
	OfferedPerS  float64   `json:"offered"`
	AdmittedPerS float64   `json:"admitted"`
	DeniedPerS   float64   `json:"denied"`
	ErrorsPerS   float64   `json:"errors"`
	SyncPerS     float64   `json:"sync"`
	P50          float64   `json:"p50"`
	P95          float64   `json:"p95"`
	P99          float64   `json:"p99"`
	NodeAdmitted []float64 `json:"node_admitted"`
}

// maxPoints is how many seconds of series the snapshot carries.
const maxPoints = 180

// incKey identifies one incarnation of a node process.
type incKey struct {
	name string
	pid  int
}

type incStats struct {
	calls, bytes uint64
	lat          Counts
}

// Monitor polls the nodes once per Step and combines their state with the
// load generator's ground truth into a Snapshot, keeping what survives a
// node's restart (its previous incarnations' sync calls and latencies).
// Create it with NewMonitor. Step must not be called concurrently with
// itself; the other methods are safe for concurrent use.
type Monitor struct {
	sup    *Supervisor
	truth  *Truth
	work   *Workload // nil with -no-load
	events *EventLog
	run    RunInfo

	mu     sync.Mutex
	gen    *Generator
	faults []FaultResult
	last   *Snapshot

	// Step's own state.
	incs       map[incKey]incStats
	prevAt     time.Time
	prevCalls  uint64
	prevBytes  uint64
	prevLat    Counts
	prevNode   map[incKey]incStats
	prevTotal  NodeCounts
	prevPer    []NodeCounts
	series     []Point
	columns    []Column
	streamRate map[[2]string]float64 // (tenant, sla) -> target rate
	hot        map[[2]string]bool
}

// NewMonitor builds a Monitor. work may be nil (no load).
func NewMonitor(sup *Supervisor, truth *Truth, work *Workload, events *EventLog, run RunInfo) *Monitor {
	m := &Monitor{sup: sup, truth: truth, work: work, events: events, run: run,
		incs: map[incKey]incStats{}, prevNode: map[incKey]incStats{},
		streamRate: map[[2]string]float64{}, hot: map[[2]string]bool{}}
	m.run.SyncMs = float64(run.SyncInterval) / float64(time.Millisecond)
	if work != nil {
		seen := map[Column]bool{}
		for _, s := range work.Streams {
			for _, sla := range s.SLAs {
				for _, t := range sla.Tiers {
					c := Column{SLA: sla.ID, PeriodS: t.Period.Seconds()}
					k := [2]string{sla.Tenant, columnKey(c)}
					m.streamRate[k] += s.Rate
					m.hot[k] = m.hot[k] || s.Hot
					if !seen[c] {
						seen[c] = true
						m.columns = append(m.columns, c)
					}
				}
			}
		}
		perSLA := map[string]int{}
		for _, c := range m.columns {
			perSLA[c.SLA]++
		}
		for i := range m.columns {
			c := &m.columns[i]
			c.Label = c.SLA
			if perSLA[c.SLA] > 1 {
				c.Label = fmt.Sprintf("%s/%gs", c.SLA, c.PeriodS)
			}
		}
	}
	return m
}

func columnKey(c Column) string { return fmt.Sprintf("%s/%g", c.SLA, c.PeriodS) }

// SetGenerator attaches the load generator once it exists.
func (m *Monitor) SetGenerator(g *Generator) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen = g
}

// AddFault records the outcome of a scripted or manual fault.
func (m *Monitor) AddFault(f FaultResult) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults = append(m.faults, f)
}

// Last returns the latest snapshot (nil before the first Step).
func (m *Monitor) Last() *Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// Step polls every node and builds a new snapshot.
func (m *Monitor) Step(ctx context.Context) *Snapshot {
	procs := m.sup.Poll(ctx, 800*time.Millisecond)
	now := time.Now()
	m.mu.Lock()
	gen, faults := m.gen, slices.Clone(m.faults)
	m.mu.Unlock()

	dt := now.Sub(m.prevAt).Seconds()
	if m.prevAt.IsZero() || dt <= 0 {
		dt = 0
	}
	per := func(d float64) float64 {
		if dt == 0 {
			return 0
		}
		return d / dt
	}
	snap := &Snapshot{Time: now, Run: m.run, Partition: m.sup.CurrentPartition(), Columns: m.columns, Faults: faults}

	// Nodes.
	total, perNode := m.truth.Totals()
	for i, p := range procs {
		v := NodeView{ProcStatus: p}
		if ns := p.Node; ns != nil {
			k := incKey{ns.Name, ns.PID}
			cur := incStats{calls: ns.SyncCalls, bytes: ns.SyncBytes, lat: CountsFromSparse(ns.LatencyHist)}
			m.incs[k] = cur
			prev := m.prevNode[k]
			m.prevNode[k] = cur
			v.Answering = true
			v.Members = ns.Members
			v.Partition = ns.Partition
			v.SyncCalls, v.SyncBytes = ns.SyncCalls, ns.SyncBytes
			v.SyncPerS = per(float64(cur.calls - prev.calls))
			v.Latency = cur.lat.Sub(prev.lat).Quantiles()
			v.Served, v.Limited = ns.Served, ns.Limited
		}
		if i < len(perNode) && i < len(m.prevPer) {
			v.OfferedPerS = per(float64(perNode[i].Offered - m.prevPer[i].Offered))
			v.AdmittedPerS = per(float64(perNode[i].Admitted - m.prevPer[i].Admitted))
			v.ErrorsPerS = per(float64(perNode[i].Errors - m.prevPer[i].Errors))
		}
		snap.Nodes = append(snap.Nodes, v)
	}

	// Cluster.
	var calls, bytes uint64
	var lat Counts
	for _, st := range m.incs {
		calls += st.calls
		bytes += st.bytes
		lat = lat.Add(st.lat)
	}
	c := &snap.Cluster
	c.SyncCalls, c.SyncBytes = calls, bytes
	c.SyncPerS = per(float64(calls - m.prevCalls))
	c.SyncBytesPerS = per(float64(bytes - m.prevBytes))
	c.Latency = lat.Sub(m.prevLat).Quantiles()
	c.LatencyTotal = lat.Quantiles()
	c.Totals = total
	c.OfferedPerS = per(float64(total.Offered - m.prevTotal.Offered))
	c.AdmittedPerS = per(float64(total.Admitted - m.prevTotal.Admitted))
	c.DeniedPerS = per(float64(total.Denied - m.prevTotal.Denied))
	c.ErrorsPerS = per(float64(total.Errors - m.prevTotal.Errors))

	// Load.
	snap.Load.State = LoadOff
	var gs GenStats
	if gen != nil {
		gs = gen.Stats()
		snap.Load.GenStats = gs
		switch {
		case !gs.Stopped.IsZero():
			snap.Load.State = LoadDone
			snap.Load.Elapsed = gs.Stopped.Sub(gs.Started).Seconds()
		case gs.Started.IsZero() || now.Before(gs.Started):
			snap.Load.State = LoadWaiting
			if !gs.Started.IsZero() {
				snap.Load.StartsIn = gs.Started.Sub(now).Seconds()
			}
		default:
			snap.Load.State = LoadRunning
			snap.Load.Elapsed = now.Sub(gs.Started).Seconds()
		}
	}

	// Tenants.
	if m.work != nil {
		snap.Tenants = m.tenants(now, gs)
	}

	// Series.
	if dt > 0 {
		pt := Point{T: float64(now.UnixMilli()) / 1e3, OfferedPerS: c.OfferedPerS, AdmittedPerS: c.AdmittedPerS,
			DeniedPerS: c.DeniedPerS, ErrorsPerS: c.ErrorsPerS, SyncPerS: c.SyncPerS,
			P50: c.Latency.P50, P95: c.Latency.P95, P99: c.Latency.P99}
		for _, v := range snap.Nodes {
			pt.NodeAdmitted = append(pt.NodeAdmitted, v.AdmittedPerS)
		}
		m.series = append(m.series, pt)
		if len(m.series) > maxPoints {
			m.series = slices.Delete(m.series, 0, len(m.series)-maxPoints)
		}
	}
	snap.Series = slices.Clone(m.series)
	if m.events != nil {
		snap.Events = m.events.Last(12)
	}

	m.prevAt, m.prevCalls, m.prevBytes, m.prevLat = now, calls, bytes, lat
	m.prevTotal, m.prevPer = total, perNode
	m.mu.Lock()
	m.last = snap
	m.mu.Unlock()
	return snap
}

// complete reports whether the window [start, start+period) lies inside
// the load's run, as of now (a running load's window is complete once it
// has ended).
func complete(gs GenStats, start time.Time, period time.Duration, now time.Time) bool {
	if gs.Started.IsZero() || start.Before(gs.Started) {
		return false
	}
	end := gs.Stopped
	if end.IsZero() {
		end = now
	}
	return !start.Add(period).After(end)
}

func (m *Monitor) tenants(now time.Time, gs GenStats) []TenantView {
	var maxP time.Duration
	for _, c := range m.columns {
		maxP = max(maxP, time.Duration(c.PeriodS*float64(time.Second)))
	}
	ws := m.truth.Windows(now.Add(-2 * maxP))
	byKey := map[WindowKey]*Window{}
	for i := range ws {
		byKey[ws[i].WindowKey] = &ws[i]
	}
	tenants := map[string]bool{}
	var names []string
	for _, s := range m.work.Streams {
		for _, sla := range s.SLAs {
			if !tenants[sla.Tenant] {
				tenants[sla.Tenant] = true
				names = append(names, sla.Tenant)
			}
		}
	}
	slices.Sort(names)
	// "now" for the current window: the load's end once it has stopped.
	at := now
	if !gs.Stopped.IsZero() {
		at = gs.Stopped.Add(-time.Nanosecond)
	}
	var out []TenantView
	for _, t := range names {
		tv := TenantView{Tenant: t}
		for _, c := range m.columns {
			k := [2]string{t, columnKey(c)}
			cell := TenantCell{TargetRate: m.streamRate[k], Hot: m.hot[k]}
			tv.Hot = tv.Hot || cell.Hot
			period := time.Duration(c.PeriodS * float64(time.Second))
			cur := counters.WindowStart(at.UnixNano(), int64(period))
			if w := byKey[WindowKey{Tenant: t, SLA: c.SLA, Period: period, Start: cur}]; w != nil {
				cell.Limit = w.Limit
				cell.Current = windowView(w, gs, now)
			}
			if w := byKey[WindowKey{Tenant: t, SLA: c.SLA, Period: period, Start: cur - int64(period)}]; w != nil {
				cell.Limit = w.Limit
				cell.Last = windowView(w, gs, now)
			}
			tv.Cells = append(tv.Cells, cell)
		}
		out = append(out, tv)
	}
	return out
}

func windowView(w *Window, gs GenStats, now time.Time) *WindowView {
	v := &WindowView{Start: time.Unix(0, w.Start), Offered: w.Offered, Admitted: w.Admitted, Denied: w.Denied, Errors: w.Errors,
		Complete: complete(gs, time.Unix(0, w.Start), w.Period, now)}
	for _, n := range w.PerNode {
		v.PerNode = append(v.PerNode, n.Admitted)
	}
	v.Diff = w.Admitted - min(w.Offered, w.Limit)
	if w.Limit > 0 {
		v.DiffPct = 100 * float64(v.Diff) / float64(w.Limit)
	}
	return v
}

// Report is the JSON the demo prints at the end with -report json.
type Report struct {
	Nodes        int                   `json:"nodes"`
	Policy       string                `json:"policy"`
	SyncMs       float64               `json:"sync_interval_ms"`
	Rate         float64               `json:"rate"`
	Clients      string                `json:"clients"` // how the load reached the nodes (LoadConfig.Clients)
	Tenants      int                   `json:"tenants"`
	Limits       string                `json:"limits"`
	LoadStart    time.Time             `json:"load_start"`
	LoadEnd      time.Time             `json:"load_end"`
	Windows      []ReportWindow        `json:"windows"`
	LatencyUs    Quantiles             `json:"latency_us"`
	Sync         ReportSync            `json:"sync"`
	Totals       NodeCounts            `json:"totals"`
	PerNode      map[string]NodeCounts `json:"per_node"`
	Generator    GenStats              `json:"generator"`
	Faults       []FaultResult         `json:"faults,omitempty"`
	MaxOvershoot float64               `json:"max_overshoot_pct"` // over complete enforced windows, % of the limit
}

// ReportSync is the cluster's sync traffic over the whole run (every
// incarnation of every node).
type ReportSync struct {
	Calls    uint64  `json:"calls"`
	Bytes    uint64  `json:"bytes"`
	CallsPer float64 `json:"calls_per_s"` // per second of load (of uptime with -no-load)
}

// ReportWindow is one window of the ground truth.
type ReportWindow struct {
	Tenant      string           `json:"tenant"`
	SLA         string           `json:"sla"`
	PeriodS     float64          `json:"period_s"`
	WindowStart time.Time        `json:"window_start"`
	Limit       int64            `json:"limit"`
	Offered     int64            `json:"offered"`
	Admitted    int64            `json:"admitted"`
	Denied      int64            `json:"denied"`
	Errors      int64            `json:"errors"`
	Complete    bool             `json:"complete"`
	Hot         bool             `json:"hot"`
	Shadow      bool             `json:"shadow,omitempty"`
	PerNode     map[string]int64 `json:"per_node_admitted"`
}

// Report builds the final report from the latest Step (call Step once
// more after the load has stopped, before the nodes are stopped).
func (m *Monitor) Report() Report {
	snap := m.Last()
	now := time.Now()
	names := m.sup.Plan().Names()
	r := Report{Nodes: m.run.Nodes, Policy: m.run.Policy, SyncMs: m.run.SyncMs, Rate: m.run.Rate, Clients: m.run.Clients, Tenants: m.run.Tenants, Limits: m.run.Limits, PerNode: map[string]NodeCounts{}}
	m.mu.Lock()
	gen := m.gen
	r.Faults = slices.Clone(m.faults)
	m.mu.Unlock()
	var gs GenStats
	if gen != nil {
		gs = gen.Stats()
		r.Generator = gs
		r.LoadStart, r.LoadEnd = gs.Started, gs.Stopped
	}
	if snap != nil {
		r.LatencyUs = snap.Cluster.LatencyTotal
		r.Sync = ReportSync{Calls: snap.Cluster.SyncCalls, Bytes: snap.Cluster.SyncBytes}
		// Calls happen only while there are counts to sync: per second of
		// load (per second of uptime without load).
		span := snap.Time.Sub(m.run.Started).Seconds()
		if !gs.Started.IsZero() && !gs.Stopped.IsZero() {
			span = gs.Stopped.Sub(gs.Started).Seconds()
		}
		if span > 0 {
			r.Sync.CallsPer = math.Round(float64(r.Sync.Calls)/span*10) / 10
		}
	}
	total, perNode := m.truth.Totals()
	r.Totals = total
	for i, n := range perNode {
		r.PerNode[names[i]] = n
	}
	r.Windows = []ReportWindow{}
	for _, w := range m.truth.Windows(time.Time{}) {
		rw := ReportWindow{Tenant: w.Tenant, SLA: w.SLA, PeriodS: w.Period.Seconds(), WindowStart: time.Unix(0, w.Start).UTC(),
			Limit: w.Limit, Offered: w.Offered, Admitted: w.Admitted, Denied: w.Denied, Errors: w.Errors,
			Complete: complete(gs, time.Unix(0, w.Start), w.Period, now), Shadow: w.Shadow,
			Hot: m.hot[[2]string{w.Tenant, columnKey(Column{SLA: w.SLA, PeriodS: w.Period.Seconds()})}], PerNode: map[string]int64{}}
		for i, n := range w.PerNode {
			rw.PerNode[names[i]] = n.Admitted
		}
		if rw.Complete && !rw.Shadow && rw.Limit > 0 {
			r.MaxOvershoot = max(r.MaxOvershoot, 100*float64(rw.Admitted-rw.Limit)/float64(rw.Limit))
		}
		r.Windows = append(r.Windows, rw)
	}
	return r
}
