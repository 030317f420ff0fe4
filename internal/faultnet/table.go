// Package faultnet lets tests cut the network between chosen nodes that all
// listen on 127.0.0.1.
//
// A [Table] maps listen addresses ("127.0.0.1:port") to node names and holds
// the set of node pairs that are currently cut. Two adapters consult it:
// [WrapTransport] wraps a memberlist transport (gossip traffic) and [Dialer]
// builds a dial function for gRPC (grpc.WithContextDialer). Connections made
// through either adapter are tracked, so a Cut also breaks connections that
// were already established, the way a real partition does.
//
// faultnet is a test tool: it favours simplicity over speed and is only
// imported from tests and demos.
package faultnet

import (
	"errors"
	"sync"
)

// ErrBlocked is returned (wrapped) by dials, reads and writes between two
// nodes that are cut from each other.
var ErrBlocked = errors.New("faultnet: blocked by partition")

// pair is an unordered pair of node names, stored with a <= b.
type pair struct{ a, b string }

func makePair(x, y string) pair {
	if x > y {
		x, y = y, x
	}
	return pair{x, y}
}

// Table is a partition table: which addresses belong to which node, which
// node pairs cannot talk to each other, and which directions are dropped by
// one-way cuts. A connection (TCP: gRPC, memberlist streams) needs both
// directions, so a one-way cut breaks connections both ways and drops
// packets (memberlist's UDP) one way only.
//
// The zero value is not usable; call [New]. A Table is safe for concurrent
// use by multiple goroutines.
type Table struct {
	mu     sync.RWMutex
	nodeOf map[string]string // listen (or connection) address -> node name
	cut    map[pair]struct{}
	oneway map[[2]string]struct{} // (from, to) node pairs whose packets are dropped
	conns  map[*conn]struct{}     // live connections made through an adapter
}

// New returns an empty Table: no addresses registered, nothing cut.
func New() *Table {
	return &Table{
		nodeOf: make(map[string]string),
		cut:    make(map[pair]struct{}),
		oneway: make(map[[2]string]struct{}),
		conns:  make(map[*conn]struct{}),
	}
}

// Register maps each listen address (for example "127.0.0.1:7946") to node.
// A node may own several addresses (gossip and gRPC). Registering an address
// again moves it to the new node. Addresses that are never registered are
// never blocked.
func (t *Table) Register(node string, addrs ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range addrs {
		t.nodeOf[a] = node
	}
}

// Unregister forgets the given addresses.
func (t *Table) Unregister(addrs ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range addrs {
		delete(t.nodeOf, a)
	}
}

// Node reports which node owns addr.
func (t *Table) Node(addr string) (node string, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	node, ok = t.nodeOf[addr]
	return node, ok
}

// Cut blocks traffic in both directions between every node of groupA and
// every node of groupB. A node that appears in both groups is not cut from
// itself. Established connections between newly cut pairs are closed.
func (t *Table) Cut(groupA, groupB []string) {
	t.mu.Lock()
	for _, a := range groupA {
		for _, b := range groupB {
			if a != b {
				t.cut[makePair(a, b)] = struct{}{}
			}
		}
	}
	t.mu.Unlock()
	t.closeBlocked()
}

// Isolate cuts node from every other node listed in all (node itself may be
// listed; it is skipped).
func (t *Table) Isolate(node string, all []string) {
	t.Cut([]string{node}, all)
}

// CutOneWay drops everything sent from the nodes of from to the nodes of
// to, while the other direction still gets through (a firewall rule on one
// side, a broken route): packets one way are lost, and connections between
// the pairs, which need both directions, fail and are closed.
func (t *Table) CutOneWay(from, to []string) {
	t.mu.Lock()
	for _, a := range from {
		for _, b := range to {
			if a != b {
				t.oneway[[2]string{a, b}] = struct{}{}
			}
		}
	}
	t.mu.Unlock()
	t.closeBlocked()
}

// Heal removes every cut, both ways and one way. Connections closed by
// earlier cuts stay closed; new dials succeed again.
func (t *Table) Heal() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.cut)
	clear(t.oneway)
}

// BlockedNodes reports whether a connection between nodes a and b is cut:
// by a cut, or by a one-way cut in either direction. A node is never cut
// from itself.
func (t *Table) BlockedNodes(a, b string) bool {
	if a == b {
		return false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.connCut(a, b)
}

// connCut reports whether a connection between two distinct nodes is cut.
// The lock must be held.
func (t *Table) connCut(a, b string) bool {
	_, blocked := t.cut[makePair(a, b)]
	_, ab := t.oneway[[2]string{a, b}]
	_, ba := t.oneway[[2]string{b, a}]
	return blocked || ab || ba
}

// Blocked reports whether a packet from fromAddr to toAddr is dropped.
// Unknown addresses are never blocked.
func (t *Table) Blocked(fromAddr, toAddr string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	a, b, ok := t.nodes(fromAddr, toAddr)
	if !ok {
		return false
	}
	_, blocked := t.cut[makePair(a, b)]
	_, oneway := t.oneway[[2]string{a, b}]
	return blocked || oneway
}

// BlockedConn reports whether a connection between the nodes of two
// addresses is cut (both directions are needed). Unknown addresses are
// never blocked.
func (t *Table) BlockedConn(addrA, addrB string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	a, b, ok := t.nodes(addrA, addrB)
	return ok && t.connCut(a, b)
}

// nodes looks both addresses up; ok is false if either is unknown or both
// are the same node. The lock must be held.
func (t *Table) nodes(addrA, addrB string) (a, b string, ok bool) {
	a, okA := t.nodeOf[addrA]
	b, okB := t.nodeOf[addrB]
	return a, b, okA && okB && a != b
}

func (t *Table) track(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.conns[c] = struct{}{}
}

func (t *Table) untrack(c *conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.conns, c)
	if c.alias != "" {
		delete(t.nodeOf, c.alias)
	}
}

// closeBlocked closes every tracked connection whose pair is now cut. The
// check and the close run outside the table lock (the check takes it).
func (t *Table) closeBlocked() {
	t.mu.RLock()
	live := make([]*conn, 0, len(t.conns))
	for c := range t.conns {
		live = append(live, c)
	}
	t.mu.RUnlock()
	for _, c := range live {
		if c.blocked() {
			_ = c.Close()
		}
	}
}
