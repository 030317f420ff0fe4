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

// Table is a partition table: which addresses belong to which node, and which
// node pairs cannot talk to each other. A cut is always symmetric.
//
// The zero value is not usable; call [New]. A Table is safe for concurrent
// use by multiple goroutines.
type Table struct {
	mu     sync.RWMutex
	nodeOf map[string]string // listen (or connection) address -> node name
	cut    map[pair]struct{}
	conns  map[*conn]struct{} // live connections made through an adapter
}

// New returns an empty Table: no addresses registered, nothing cut.
func New() *Table {
	return &Table{
		nodeOf: make(map[string]string),
		cut:    make(map[pair]struct{}),
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

// Heal removes every cut. Connections closed by earlier cuts stay closed;
// new dials succeed again.
func (t *Table) Heal() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.cut)
}

// BlockedNodes reports whether traffic between nodes a and b is cut.
// A node is never cut from itself.
func (t *Table) BlockedNodes(a, b string) bool {
	if a == b {
		return false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, blocked := t.cut[makePair(a, b)]
	return blocked
}

// Blocked reports whether traffic from fromAddr to toAddr is cut. Unknown
// addresses are never blocked.
func (t *Table) Blocked(fromAddr, toAddr string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	a, ok := t.nodeOf[fromAddr]
	if !ok {
		return false
	}
	b, ok := t.nodeOf[toAddr]
	if !ok || a == b {
		return false
	}
	_, blocked := t.cut[makePair(a, b)]
	return blocked
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
