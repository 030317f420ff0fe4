package httpfilter

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Decision results, the "result" label of peerlimit_filter_decisions_total.
const (
	resultAllowed   = "allowed"        // admitted (every matching SLA records it; shadow SLAs always)
	resultDenied    = "denied"         // refused; recorded by the SLA whose tier refused
	resultNoTenant  = "no_tenant"      // no tenant and noTenant: reject (400 / InvalidArgument), or a shadow SLA skipped
	resultBadTenant = "invalid_tenant" // a tenant that cannot be counted (400 / InvalidArgument), or a shadow SLA skipped
	resultError     = "error"          // the limiter failed (see WithFailClosed)
)

// metrics are the filter's Prometheus series. Handles for one SLA are
// looked up once per limits version (slaMetrics) so that a request only
// does atomic adds.
type metrics struct {
	decisions *prometheus.CounterVec // protocol, sla, result
	wouldDeny *prometheus.CounterVec // protocol, sla
	reloads   *prometheus.CounterVec // result: ok, rejected
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "peerlimit",
			Subsystem: "filter",
			Name:      "decisions_total",
			Help: "Rate-limit decisions per SLA. result: allowed (every matching SLA of an admitted request, and every counted request of a shadow SLA), " +
				"denied (the SLA whose tier refused the request), no_tenant (tenant missing: rejected, or a shadow SLA not counted), " +
				"invalid_tenant (a tenant too long, not UTF-8 or with a control character: rejected, or a shadow SLA not counted), error (the limiter failed).",
		}, []string{"protocol", "sla", "result"}),
		wouldDeny: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "peerlimit",
			Subsystem: "filter",
			Name:      "shadow_would_deny_total",
			Help:      "Requests a shadow SLA would have denied (they were served).",
		}, []string{"protocol", "sla"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "peerlimit",
			Subsystem: "filter",
			Name:      "limits_compiled_total",
			Help:      "New limits seen by the filter. result: ok (now enforced), rejected (not usable by this filter, e.g. an unregistered tenant func: the previous limits stay in force).",
		}, []string{"result"}),
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.decisions, m.wouldDeny, m.reloads}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, fmt.Errorf("httpfilter: register metrics: %w", err)
		}
	}
	return m, nil
}

// slaMetrics are one SLA's counters for one protocol.
type slaMetrics struct {
	allowed, denied, noTenant, badTenant, errors, wouldDeny prometheus.Counter
}

func (m *metrics) forSLA(protocol, id string) slaMetrics {
	return slaMetrics{
		allowed:   m.decisions.WithLabelValues(protocol, id, resultAllowed),
		denied:    m.decisions.WithLabelValues(protocol, id, resultDenied),
		noTenant:  m.decisions.WithLabelValues(protocol, id, resultNoTenant),
		badTenant: m.decisions.WithLabelValues(protocol, id, resultBadTenant),
		errors:    m.decisions.WithLabelValues(protocol, id, resultError),
		wouldDeny: m.wouldDeny.WithLabelValues(protocol, id),
	}
}
