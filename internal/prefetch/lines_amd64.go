package prefetch

import "unsafe"

// Lines asks the CPU to load every cache line of the size bytes at p
// (PREFETCHT0, prefetch_amd64.s) and returns 0. Unlike a load, a prefetch
// does not hold up the instructions after it until its line arrives, so
// the caller goes on to the first object of a chunk while the others are
// still on their way. An object need not start on a line: the lines of its
// first and last bytes and every line in between are asked for.
func Lines(p unsafe.Pointer, size uintptr) byte {
	prefetch(p, size)
	return 0
}

// prefetch issues PREFETCHT0 for every cache line of the size bytes at p.
// A prefetch never faults and reads nothing the program sees.
//
//go:noescape
func prefetch(p unsafe.Pointer, size uintptr)
