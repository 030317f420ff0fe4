package counters

import (
	"strings"
	"sync"
	"sync/atomic"
)

// A PeerID names one run of a member (its name and incarnation) within one
// Table: a slot holds it, 4 bytes, where the name and incarnation would
// take 24, twice per slot (Slot.From, Slot.GrantFrom). Table.PeerID makes
// one and Table.Peer resolves it. The zero PeerID names nobody: the empty
// name at incarnation 0.
type PeerID uint32

type peerName struct {
	name string
	inc  uint64
}

// peers interns the runs of members that answered this table's series. A
// run gets an id the first time it answers and keeps it for the table's
// life: a cluster sees one per member and restart, a few dozen bytes each.
type peers struct {
	mu  sync.Mutex
	ids map[peerName]PeerID // under mu
	// names[id] is the run id names; readers load it without locking. It
	// only grows: an append writes past every length a reader may hold.
	names atomic.Pointer[[]peerName]
}

// PeerID returns the id of the member run (name, incarnation) in this
// table, making one the first time. It is safe for concurrent use; callers
// that record many answers of one run look its id up once.
func (t *Table) PeerID(name string, incarnation uint64) PeerID {
	if name == "" && incarnation == 0 {
		return 0
	}
	p := &t.peers
	k := peerName{name, incarnation}
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.ids[k]; ok {
		return id
	}
	var names []peerName
	if l := p.names.Load(); l != nil {
		names = *l
	} else {
		names = []peerName{{}} // id 0: nobody
		p.ids = map[peerName]PeerID{}
	}
	if uint64(len(names)) > uint64(^PeerID(0)) {
		panic("counters: more than 2^32 member runs in one table")
	}
	k.name = strings.Clone(name)
	id := PeerID(len(names))
	names = append(names, k)
	p.ids[k] = id
	p.names.Store(&names)
	return id
}

// Peer returns the member run id names: its name and incarnation, or ""
// and 0 for the zero id (or an id this table did not make). It takes no
// lock.
func (t *Table) Peer(id PeerID) (name string, incarnation uint64) {
	l := t.peers.names.Load()
	if l == nil || int(id) >= len(*l) {
		return "", 0
	}
	n := (*l)[id]
	return n.name, n.inc
}
