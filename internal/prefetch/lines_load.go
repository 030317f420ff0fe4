//go:build !amd64

package prefetch

import "unsafe"

// Lines reads a byte of every cache line of the size bytes at p and
// returns their exclusive or. An object need not start on a line (its size
// class need not be a multiple of one): reads at most a line apart from
// its first byte to its last touch every line it overlaps.
//
//go:norace
func Lines(p unsafe.Pointer, size uintptr) byte {
	const line = 64
	x := *(*byte)(unsafe.Add(p, size-1))
	for off := uintptr(0); off < size; off += line {
		x ^= *(*byte)(unsafe.Add(p, off))
	}
	return x
}
