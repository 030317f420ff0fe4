package counters

import "unsafe"

// Prefetch reads every cache line of the entry and discards what it read,
// without its lock, so that a caller about to lock many entries one after
// another (the sync touches every series of a large table, few of which
// are in the CPU's caches) can have their loads from memory overlap: a
// lock is a barrier that the next entry's loads do not pass, so that
// otherwise each entry waits for its memory in turn. It returns a value
// that depends on the reads, for the caller to fold away
// (runtime.KeepAlive) so that they are not elided.
//
// An entry need not start on a cache line (its size class is not a
// multiple of one): a 240-byte entry overlaps five lines when it starts
// more than 16 bytes into one, and the fifth is read too.
//
// The reads race with writers by design: their values are never used, and
// a racing read of a byte observes some write (the Go memory model), so
// the race detector is told to ignore them.
//
//go:norace
func (e *Entry) Prefetch() byte {
	const line = 64
	p := unsafe.Pointer(e)
	size := unsafe.Sizeof(*e)
	// Reads at most a line apart, from the first byte to the last, touch
	// every line in between.
	x := *(*byte)(unsafe.Add(p, size-1))
	for off := uintptr(0); off < size; off += line {
		x ^= *(*byte)(unsafe.Add(p, off))
	}
	return x
}
