package counters

import (
	"unsafe"

	"github.com/peerlimit/peerlimit/internal/prefetch"
)

// Prefetch reads every cache line of the entry, and discards what it
// read, without its lock, so that a caller about to lock many entries one
// after another (the sync touches every series of a large table, few of
// which are in the CPU's caches) can have their loads from memory overlap:
// a lock is a barrier that the next entry's loads do not pass, so that
// otherwise each entry waits for its memory in turn. Its previous window's
// slot, allocated apart, is PrefetchPast's: reading the pointer to it
// waits for the entry's line, so a caller asks for every entry of a batch
// first and for their past slots after. It returns a value that depends on
// the reads (0 where they are prefetch instructions), for the caller to
// fold away (runtime.KeepAlive) so that they are not elided.
//
// The reads race with writers by design: their values are never used, and
// a racing read of a byte observes some write (the Go memory model), as a
// racing read of the slot's pointer observes a pointer written there, so
// the race detector is told to ignore them.
//
//go:norace
func (e *Entry) Prefetch() byte {
	return prefetch.Lines(unsafe.Pointer(e), unsafe.Sizeof(*e))
}

// PrefetchPast reads every cache line of the entry's previous window's
// slot, if it has one, as Prefetch does the entry's.
//
//go:norace
func (e *Entry) PrefetchPast() byte {
	if p := e.prev; p != nil {
		return prefetch.Lines(unsafe.Pointer(p), unsafe.Sizeof(*p))
	}
	return 0
}

// WireHint returns what WireIndex returns, read without the entry's lock:
// a value SetWireIndex stored at some time, for a caller that only loads
// what it points to ahead of locking the entry (as Prefetch does), and
// whose use of a stale one costs nothing but the load.
//
//go:norace
func (e *Entry) WireHint() uint32 { return e.wire }
