package counters

import "unsafe"

// Prefetch reads every cache line of the entry, and of its previous
// window's slot if it has one (Entry.prev, allocated apart), and discards
// what it read, without its lock, so that a caller about to lock many
// entries one after another (the sync touches every series of a large
// table, few of which are in the CPU's caches) can have their loads from
// memory overlap: a lock is a barrier that the next entry's loads do not
// pass, so that otherwise each entry waits for its memory in turn. It
// returns a value that depends on the reads, for the caller to fold away
// (runtime.KeepAlive) so that they are not elided.
//
// The reads race with writers by design: their values are never used, and
// a racing read of a byte observes some write (the Go memory model), as a
// racing read of the slot's pointer observes a pointer written there, so
// the race detector is told to ignore them.
//
//go:norace
func (e *Entry) Prefetch() byte {
	x := lines(unsafe.Pointer(e), unsafe.Sizeof(*e))
	if p := e.prev; p != nil {
		x ^= lines(unsafe.Pointer(p), unsafe.Sizeof(*p))
	}
	return x
}

// WireHint returns what WireIndex returns, read without the entry's lock:
// a value SetWireIndex stored at some time, for a caller that only loads
// what it points to ahead of locking the entry (as Prefetch does), and
// whose use of a stale one costs nothing but the load.
//
//go:norace
func (e *Entry) WireHint() uint32 { return e.wire }
