package node

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// RegisterRuntimeMetrics registers the Go runtime and process collectors
// (go_*, process_*) with reg. New does it on the registry it creates when
// Config.Registry is nil; call it on a registry of your own that lacks
// them. A *prometheus.Registry from prometheus.NewRegistry has neither;
// prometheus.DefaultRegisterer has both already, and registering them twice
// is an error.
func RegisterRuntimeMetrics(reg prometheus.Registerer) error {
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return fmt.Errorf("node: register Go collector: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return fmt.Errorf("node: register process collector: %w", err)
	}
	return nil
}

// metrics are the node's Prometheus series, on its own registry.
type metrics struct {
	allowed, denied   prometheus.Counter
	decisionSeconds   prometheus.Observer
	syncOK, syncError prometheus.Counter
	syncSeconds       prometheus.Observer
	syncBytes         prometheus.Counter
	batchReports      prometheus.Observer
	inboundRejected   prometheus.Counter
	authRefused       prometheus.Counter
	peersStopped      prometheus.Counter
	members           prometheus.Gauge
	storeDown         prometheus.Gauge
	pending           prometheus.Counter
	pendingAdmitted   prometheus.Counter
	pendingSeconds    prometheus.Observer
	problems          *prometheus.GaugeVec   // by problem, 0 or 1
	conflicts         *prometheus.CounterVec // by whose
}

// newMetrics registers the node's series with reg. If one is registered
// already (another node on the same registry), it unregisters what it
// registered and says what to do.
func newMetrics(reg prometheus.Registerer, n *Node) (*metrics, error) {
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "peerlimit_decisions_total", Help: "Rate-limit decisions by result.",
	}, []string{"result"})
	syncCalls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "peerlimit_sync_calls_total", Help: "Sync calls sent to owners (or the store), by result.",
	}, []string{"result"})
	decisionSeconds := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "peerlimit_decision_seconds",
		Help:    "Time to decide a request, sampled on one decision in 64.",
		Buckets: []float64{50e-9, 100e-9, 200e-9, 500e-9, 1e-6, 2e-6, 5e-6, 10e-6, 100e-6},
	})
	syncSeconds := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "peerlimit_sync_call_seconds", Help: "Latency of sync calls.",
		Buckets: prometheus.ExponentialBuckets(100e-6, 2.5, 12),
	})
	batchReports := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "peerlimit_sync_batch_reports", Help: "Reports per sync batch.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 10),
	})
	syncBytes := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "peerlimit_sync_bytes_total", Help: "Bytes of sync requests sent.",
	})
	inboundRejected := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "peerlimit_sync_inbound_rejected_total", Help: "Inbound sync batches rejected as invalid.",
	})
	authRefused := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "peerlimit_sync_auth_refused_total",
		Help: "Sync calls refused because their authentication tag was missing, wrong, stale or replayed, and answers refused because theirs did not verify (gossip secret keys set).",
	})
	peersStopped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "peerlimit_peers_stopped_total",
		Help: "Peers taken for stopped because they refused connections (their process crashed or was killed); see Config.IgnoreRefusals.",
	})
	members := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "peerlimit_members", Help: "Alive members in this node's view, itself included.",
	})
	storeDown := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "peerlimit_store_down", Help: "1 while the backing store cannot be reached.",
	})
	pending := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "peerlimit_pending_total",
		Help: "Requests that waited for the owner's answer (lease policy: no grant yet, or budget moving between instances), by outcome.",
	}, []string{"result"})
	pendingSeconds := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "peerlimit_pending_wait_seconds", Help: "How long pending requests waited for the owner's answer.",
		Buckets: prometheus.ExponentialBuckets(100e-6, 2.5, 12),
	})
	keys := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "peerlimit_keys_cached", Help: "Counter series held locally.",
	}, func() float64 { return float64(n.engine.Table().Len()) })
	owned := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "peerlimit_windows_owned", Help: "Windows this node aggregates as their owner.",
	}, func() float64 { return float64(n.engine.Owner().Stats().Windows) })
	evicted := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "peerlimit_evictions_total", Help: "Live counter series evicted to stay within the table's bound.",
	}, func() float64 { return float64(n.engine.Table().Stats().Evicted) })
	expired := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "peerlimit_expired_total", Help: "Counter series removed after their last window.",
	}, func() float64 { return float64(n.engine.Table().Stats().Expired) })
	authenticated := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "peerlimit_sync_authenticated",
		Help: "1 while sync calls are signed and checked with a key of the gossip keyring, 0 without one.",
	}, func() float64 {
		if n.auth.on() {
			return 1
		}
		return 0
	})
	overflow := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "peerlimit_series_overflow_total",
		Help: "Requests of new series decided on their tier's overflow series because the table was full of series in use (counters.Config.MaxEntries).",
	}, func() float64 { return float64(n.engine.Table().Stats().Overflowed) })
	problems := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "peerlimit_health_problem",
		Help: "1 while the node has this problem (name_conflict, no_seed, peer_unreachable, store_unreachable); see Node.Health.",
	}, []string{"problem"})
	for _, p := range healthProblems {
		problems.WithLabelValues(p.label)
	}
	conflicts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "peerlimit_name_conflicts_total",
		Help: "Names claimed by two live nodes, as gossip saw them: this node's own name (whose=self) or another member's (whose=other).",
	}, []string{"whose"})
	conflicts.WithLabelValues("self")
	conflicts.WithLabelValues("other")
	all := []prometheus.Collector{decisions, syncCalls, decisionSeconds, syncSeconds, batchReports, syncBytes,
		inboundRejected, authRefused, peersStopped, members, storeDown, pending, pendingSeconds, keys, owned, evicted, expired, overflow, authenticated, problems, conflicts}
	for i, c := range all {
		if err := reg.Register(c); err != nil {
			for _, done := range all[:i] {
				reg.Unregister(done)
			}
			if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
				return nil, fmt.Errorf("node: Config.Registry already holds the peerlimit_* series (another node on the same registry?): "+
					"leave Config.Registry nil to give each node its own, or pass prometheus.WrapRegistererWith(prometheus.Labels{\"node\": name}, registry) to each: %w", err)
			}
			return nil, fmt.Errorf("node: register metrics: %w", err)
		}
	}
	return &metrics{
		allowed:         decisions.WithLabelValues("allowed"),
		denied:          decisions.WithLabelValues("denied"),
		decisionSeconds: decisionSeconds,
		syncOK:          syncCalls.WithLabelValues("ok"),
		syncError:       syncCalls.WithLabelValues("error"),
		syncSeconds:     syncSeconds,
		syncBytes:       syncBytes,
		batchReports:    batchReports,
		inboundRejected: inboundRejected,
		authRefused:     authRefused,
		peersStopped:    peersStopped,
		members:         members,
		storeDown:       storeDown,
		pending:         pending.WithLabelValues("waited"),
		pendingAdmitted: pending.WithLabelValues("admitted"),
		pendingSeconds:  pendingSeconds,
		problems:        problems,
		conflicts:       conflicts,
	}, nil
}
