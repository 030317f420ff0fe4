package gossip

import (
	"fmt"

	"github.com/hashicorp/memberlist"
)

// memberlist calls these delegates on its own goroutines while holding its
// node lock. They therefore never call memberlist or user code: they copy
// what they need into Gossip state guarded by leaf mutexes (never held while
// calling memberlist) and signal the dispatcher through a one-slot channel.

// metaDelegate implements memberlist.Delegate: it publishes our metadata.
// Gossip carries no user messages, so the other methods are no-ops.
type metaDelegate struct{ g *Gossip }

func (d metaDelegate) NodeMeta(limit int) []byte {
	d.g.metaMu.RLock()
	defer d.g.metaMu.RUnlock()
	if len(d.g.localMeta) > limit { // cannot happen: Validate bounds GRPCAddr
		return nil
	}
	return d.g.localMeta
}

func (metaDelegate) NotifyMsg([]byte)                {}
func (metaDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (metaDelegate) LocalState(bool) []byte          { return nil }
func (metaDelegate) MergeRemoteState([]byte, bool)   {}

// aliveFilter implements memberlist.AliveDelegate: a node whose metadata
// cannot be decoded never becomes a peer.
type aliveFilter struct{ g *Gossip }

func (a aliveFilter) NotifyAlive(n *memberlist.Node) error {
	if _, err := decodeMeta(n.Meta); err != nil {
		a.g.warnBadMeta(n.Name, n.Address(), n.Meta, err)
		return fmt.Errorf("gossip: rejecting %s: %w", n.Name, err)
	}
	return nil
}

// events implements memberlist.EventDelegate. memberlist calls it serially.
type events struct{ g *Gossip }

func (e events) NotifyJoin(n *memberlist.Node) {
	e.g.upsert(n)
	e.g.rejoinMu.Lock()
	e.g.rejoin.alive(n.Name)
	e.g.rejoinMu.Unlock()
	e.g.signal()
}

func (e events) NotifyUpdate(n *memberlist.Node) {
	e.g.upsert(n)
	e.g.signal()
}

func (e events) NotifyLeave(n *memberlist.Node) {
	e.g.membersMu.Lock()
	delete(e.g.members, n.Name)
	e.g.membersMu.Unlock()
	if n.Name != e.g.cfg.Name {
		e.g.rejoinMu.Lock()
		e.g.rejoin.failed(n.Name, n.Address(), e.g.now())
		e.g.rejoinMu.Unlock()
	}
	e.g.signal()
}
