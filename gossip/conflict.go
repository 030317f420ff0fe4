package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrNameConflict is wrapped by the error of a Start that met another live
// node using this node's name while joining, and by [Gossip.Health] while
// such a conflict is recent.
var ErrNameConflict = errors.New("gossip: name conflict")

// maxPendingConflicts bounds the conflicts waiting for the dispatcher; more
// are dropped (the first ones already say what is wrong, and memberlist
// reports a lasting conflict again and again).
const maxPendingConflicts = 64

// Conflict is one name claimed by two nodes at different addresses, as
// memberlist reported it. It is a plain comparable value.
type Conflict struct {
	// Name is the contested name.
	Name string
	// Addr is the gossip address this node knows for Name: its own when
	// Self is true.
	Addr string
	// OtherAddr is the gossip address of the other claim, which memberlist
	// ignored.
	OtherAddr string
	// Self is true when Name is this node's own name.
	Self bool
	// Live is true when the node known at Addr is alive (always when Self
	// is true). A conflict that is not live is most often a member that
	// crashed and came back at a new address: memberlist accepts it once
	// it has forgotten the dead one (GossipToTheDeadTime, 30 s in
	// ProfileLAN), so it is logged at Info only.
	Live bool
}

// conflictError says what to do about a conflict over this node's name.
func conflictError(c Conflict) error {
	return fmt.Errorf("%w: another node at %s already uses the name %q (this node is at %s): give every instance a unique Config.Name; "+
		"if that node is this one's previous run at another address, the cluster forgets it once it is declared dead, a few seconds later",
		ErrNameConflict, c.OtherAddr, c.Name, c.Addr)
}

// conflictDelegate implements memberlist.ConflictDelegate. memberlist calls
// it under its node lock, so it only records the conflict (leaf mutexes)
// and wakes the dispatcher, which logs it and calls Config.OnConflict.
type conflictDelegate struct{ g *Gossip }

func (d conflictDelegate) NotifyConflict(existing, other *memberlist.Node) {
	g := d.g
	c := Conflict{
		Name:      existing.Name,
		Addr:      existing.Address(),
		OtherAddr: other.Address(),
		Self:      existing.Name == g.cfg.Name,
	}
	g.membersMu.RLock()
	m, ok := g.members[c.Name]
	g.membersMu.RUnlock()
	c.Live = c.Self || (ok && m.Addr == c.Addr)

	g.conflictMu.Lock()
	if c.Self {
		g.selfConflict, g.selfConflictAt = c, g.now()
	}
	if len(g.conflicts) < maxPendingConflicts {
		g.conflicts = append(g.conflicts, c)
	}
	g.conflictMu.Unlock()
	g.signal()
}

// lastSelfConflict returns the last conflict over this node's name and when
// it was seen; ok is false if there was none.
func (g *Gossip) lastSelfConflict() (c Conflict, at time.Time, ok bool) {
	g.conflictMu.Lock()
	defer g.conflictMu.Unlock()
	return g.selfConflict, g.selfConflictAt, g.selfConflict.Name != ""
}

// deliverConflicts logs the conflicts recorded since the last call and
// hands them to Config.OnConflict (the dispatcher goroutine only, or
// Start once a failed join has stopped it).
func (g *Gossip) deliverConflicts() {
	g.conflictMu.Lock()
	cs := g.conflicts
	g.conflicts = nil
	g.conflictMu.Unlock()
	for _, c := range cs {
		if g.warnEvery.Allow("conflict "+c.Name+" "+c.OtherAddr, g.now()) {
			level, msg := slog.LevelWarn, "name conflict: two live nodes claim one name; memberlist ignores the second"
			switch {
			case c.Self:
				msg = "name conflict: another node claims this node's name; give every instance a unique name"
			case !c.Live:
				level, msg = slog.LevelInfo, "a failed member is back at a new address; accepted once the old one is forgotten"
			}
			g.log.Log(context.Background(), level, msg, "name", c.Name, "addr", c.Addr, "other_addr", c.OtherAddr)
		}
		if g.cfg.OnConflict != nil {
			g.cfg.OnConflict(c)
		}
	}
}
