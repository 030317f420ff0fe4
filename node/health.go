package node

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/peerlimit/peerlimit/gossip"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Sentinel errors. Take and Allow return ErrNotStarted and ErrClosed;
// Health wraps the others.
var (
	// ErrNotStarted: the node has not been started (Take, Allow, Wait,
	// Health before Start).
	ErrNotStarted = errors.New("node: not started")
	// ErrClosed: the node was closed or killed, or its Start failed.
	ErrClosed = errors.New("node: closed")
	// ErrPeerUnreachable: every sync call to a member has failed for a
	// while (five sync intervals, or two call timeouts if longer: 1 s by
	// default), so the counts of the keys it owns are not merged.
	ErrPeerUnreachable = errors.New("node: peer unreachable")
	// ErrStoreUnreachable: the backing store (Config.Store) cannot be
	// reached; the node fails open or closed (Config.FailClosed).
	ErrStoreUnreachable = errors.New("node: store unreachable")

	// ErrNameConflict is gossip.ErrNameConflict: another live node uses
	// this node's name (Start fails with it when the join meets it).
	ErrNameConflict = gossip.ErrNameConflict
	// ErrNoSeed is gossip.ErrNoSeed: the node is alone and none of its
	// seeds answers (Start fails with it when Config.Gossip.JoinTimeout
	// is set).
	ErrNoSeed = gossip.ErrNoSeed
	// ErrUnreachableGRPCAddr is gossip.ErrUnreachableGRPCAddr: Start
	// refused a loopback gRPC address beside a routable gossip address.
	ErrUnreachableGRPCAddr = gossip.ErrUnreachableGRPCAddr
)

// healthProblems are the problems Health reports, with their label on the
// peerlimit_health_problem gauge.
var healthProblems = []struct {
	label string
	err   error
}{
	{"name_conflict", ErrNameConflict},
	{"no_seed", ErrNoSeed},
	{"peer_unreachable", ErrPeerUnreachable},
	{"store_unreachable", ErrStoreUnreachable},
}

// warnInterval is how often one repeated warning is logged.
const warnInterval = time.Minute

// failStreak is an owner's run of failed sync calls.
type failStreak struct {
	since time.Time
	addr  string
	err   error
}

// Health reports what is wrong with the node, for a health or readiness
// probe: nil while it runs without a problem, otherwise an error that says
// what to change and wraps one or more of [ErrNotStarted], [ErrClosed],
// [ErrNameConflict], [ErrNoSeed], [ErrPeerUnreachable] and
// [ErrStoreUnreachable] (test them with errors.Is). It makes no network
// call. A service wires it to its own endpoint:
//
//	http.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
//		if err := n.Health(); err != nil {
//			http.Error(w, err.Error(), http.StatusServiceUnavailable)
//		}
//	})
//
// The same state is served by the standard gRPC health service on the
// node's peer port (service "", NOT_SERVING while Health is not nil,
// checked every second) and by the peerlimit_health_problem gauge.
//
// Every problem means the node still decides requests, but enforces its
// limits less exactly than the cluster would: alone (ErrNoSeed) or with an
// owner out of reach (ErrPeerUnreachable) it falls back on what it can
// count itself. Whether that should take the service out of rotation is
// the service's choice: a readiness probe on Health does, and a node
// alone because every other instance is restarting is then unready too.
func (n *Node) Health() error {
	switch n.state.Load() {
	case stateNew:
		return ErrNotStarted
	case stateClosed:
		return ErrClosed
	}
	var errs []error
	if err := n.gossip.Health(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, n.peerProblems(time.Now())...)
	if n.storeDown.Load() {
		mode := "open (each instance admits its static share)"
		if n.cfg.FailClosed {
			mode = "closed (every request is denied)"
		}
		errs = append(errs, fmt.Errorf("%w: the last sync with the store failed; the node fails %s until it answers", ErrStoreUnreachable, mode))
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// peerFailAfter is how long an owner's sync calls must have failed before
// it is a problem: a few intervals, so that one lost call is not.
func (n *Node) peerFailAfter() time.Duration {
	return max(5*n.cfg.SyncInterval, 2*n.cfg.CallTimeout)
}

// peerProblems returns an ErrPeerUnreachable error per owner whose calls
// have failed for peerFailAfter, sorted by owner.
func (n *Node) peerProblems(now time.Time) []error {
	n.failMu.Lock()
	defer n.failMu.Unlock()
	var errs []error
	for _, owner := range slices.Sorted(maps.Keys(n.failing)) {
		f := n.failing[owner]
		if d := now.Sub(f.since); d >= n.peerFailAfter() {
			errs = append(errs, fmt.Errorf("%w: every sync call to %s at %s has failed for %v (last: %v): the counts of the keys it owns are not merged; "+
				"check that this address is reachable from this host (the peer's Config.Addr, GRPCAddr, GRPCAdvertiseAddr)",
				ErrPeerUnreachable, owner, f.addr, d.Round(time.Millisecond), f.err))
		}
	}
	return errs
}

// noteSync records the outcome of a sync call to a peer owner, and warns
// (once a minute per owner) while its calls keep failing.
func (n *Node) noteSync(owner string, err error) {
	if n.cfg.Store != nil {
		return // storeHealth reports the store
	}
	now := time.Now()
	n.failMu.Lock()
	if err == nil {
		delete(n.failing, owner)
		n.failMu.Unlock()
		return
	}
	f, ok := n.failing[owner]
	if !ok {
		f = failStreak{since: now, addr: n.memberAddr(owner)}
	}
	f.err = err
	n.failing[owner] = f
	n.failMu.Unlock()
	if d := now.Sub(f.since); d >= n.peerFailAfter() && n.warn.Allow("sync "+owner, now) {
		n.log.Warn("sync calls to a peer keep failing: the counts of the keys it owns are not merged",
			"owner", owner, "addr", f.addr, "failing_for", d.Round(time.Millisecond), "err", err)
	}
}

// memberAddr returns the published gRPC address of a member, or "".
func (n *Node) memberAddr(name string) string {
	for _, m := range n.gossip.Members() {
		if m.Name == name {
			return m.GRPCAddr
		}
	}
	return ""
}

// forgetFailures drops the failure streaks of owners that are no longer
// members.
func (n *Node) forgetFailures(members map[string]string) {
	n.failMu.Lock()
	defer n.failMu.Unlock()
	for owner := range n.failing {
		if _, ok := members[owner]; !ok {
			delete(n.failing, owner)
		}
	}
}

// onConflict is gossip's conflict callback (its dispatcher goroutine).
func (n *Node) onConflict(c gossip.Conflict) {
	switch {
	case c.Self:
		n.m.conflicts.WithLabelValues("self").Inc()
	case c.Live:
		n.m.conflicts.WithLabelValues("other").Inc()
	default:
		return // a failed member back at a new address
	}
	n.checkHealth()
}

// checkHealth publishes Health to the gauge and the gRPC health service,
// and logs when the set of problems changes. The sync loop calls it every
// second.
func (n *Node) checkHealth() {
	if n.state.Load() != stateRunning {
		return
	}
	n.healthMu.Lock()
	defer n.healthMu.Unlock()
	err := n.Health()
	var labels []string
	for _, p := range healthProblems {
		v := 0.0
		if errors.Is(err, p.err) {
			v = 1
			labels = append(labels, p.label)
		}
		n.m.problems.WithLabelValues(p.label).Set(v)
	}
	status := healthpb.HealthCheckResponse_SERVING
	if err != nil {
		status = healthpb.HealthCheckResponse_NOT_SERVING
	}
	n.health.SetServingStatus("", status)
	set := strings.Join(labels, ",")
	if set == n.lastProblems {
		return
	}
	n.lastProblems = set
	if err != nil {
		n.log.Warn("health: the node has a problem", "problems", set, "err", err)
	} else {
		n.log.Info("health: no problem left")
	}
}
