package demo

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram buckets: values (nanoseconds) below 32 have one bucket each;
// above, each power of two is split into 16 linear sub-buckets, so a
// bucket's width is at most 1/16 of its lower bound (HDR-style, 6%
// precision) from 32 ns up to the largest uint64.
const (
	histSub     = 16
	histBuckets = histSub + 60*histSub // shift 0..59
)

// bucketOf returns the bucket of v.
func bucketOf(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	shift := bits.Len64(v) - 5 // v >> shift is in [16, 31]
	return histSub + shift*histSub + int(v>>uint(shift)) - histSub
}

// bucketBounds returns the range [lo, hi) of bucket i.
func bucketBounds(i int) (lo, hi uint64) {
	if i < histSub {
		return uint64(i), uint64(i) + 1
	}
	shift := uint((i - histSub) / histSub)
	m := uint64(histSub + (i-histSub)%histSub)
	return m << shift, (m + 1) << shift
}

// Histogram counts durations in log-linear buckets of 6% precision; see
// [Counts.Quantile]. Recording is one atomic add.
//
// The zero value is an empty histogram, ready to use. It is safe for
// concurrent use.
type Histogram struct {
	counts [histBuckets]atomic.Uint64
}

// Record counts one duration (negative durations count as 0).
func (h *Histogram) Record(d time.Duration) {
	h.counts[bucketOf(uint64(max(d, 0)))].Add(1)
}

// Snapshot returns the current counts.
func (h *Histogram) Snapshot() Counts {
	c := make(Counts, histBuckets)
	for i := range h.counts {
		c[i] = h.counts[i].Load()
	}
	return c
}

// Counts is a snapshot of a [Histogram]: the count of each bucket. A nil
// Counts is empty. Its methods never modify it (they return new Counts), so
// it may be read concurrently. Counts from different histograms add up (Add), and two
// snapshots of one histogram subtract (Sub) to give what was recorded in
// between.
type Counts []uint64

// Total returns the number of values counted.
func (c Counts) Total() uint64 {
	var n uint64
	for _, v := range c {
		n += v
	}
	return n
}

// Add returns c + o as a new Counts.
func (c Counts) Add(o Counts) Counts {
	out := make(Counts, histBuckets)
	for i := range out {
		if i < len(c) {
			out[i] += c[i]
		}
		if i < len(o) {
			out[i] += o[i]
		}
	}
	return out
}

// Sub returns c - o as a new Counts, each bucket floored at 0 (so that a
// restarted process whose counts went back to zero does not underflow).
func (c Counts) Sub(o Counts) Counts {
	out := make(Counts, histBuckets)
	for i := range out {
		var a, b uint64
		if i < len(c) {
			a = c[i]
		}
		if i < len(o) {
			b = o[i]
		}
		if a > b {
			out[i] = a - b
		}
	}
	return out
}

// Quantile returns the q-quantile (0 < q <= 1) of the counted values: the
// middle of the bucket that holds the value of rank ceil(q * total). It
// returns 0 for an empty Counts.
func (c Counts) Quantile(q float64) time.Duration {
	total := c.Total()
	if total == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	if float64(rank) < q*float64(total) {
		rank++
	}
	rank = min(max(rank, 1), total)
	var seen uint64
	for i, v := range c {
		seen += v
		if seen >= rank {
			lo, hi := bucketBounds(i)
			return time.Duration(lo + (hi-lo-1)/2)
		}
	}
	return 0 // unreachable
}

// Sparse returns the non-empty buckets as [index, count] pairs, the wire
// form of /admin/state.
func (c Counts) Sparse() [][2]uint64 {
	var out [][2]uint64
	for i, v := range c {
		if v != 0 {
			out = append(out, [2]uint64{uint64(i), v})
		}
	}
	return out
}

// CountsFromSparse is the inverse of [Counts.Sparse]; pairs with an index
// out of range are ignored.
func CountsFromSparse(pairs [][2]uint64) Counts {
	c := make(Counts, histBuckets)
	for _, p := range pairs {
		if p[0] < histBuckets {
			c[p[0]] += p[1]
		}
	}
	return c
}

// Quantiles is p50/p95/p99 in microseconds, the form of the views and the
// report.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	// Count is the number of values the quantiles are computed from.
	Count uint64 `json:"count"`
}

// Quantiles returns p50, p95 and p99 in microseconds.
func (c Counts) Quantiles() Quantiles {
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	return Quantiles{P50: us(c.Quantile(0.50)), P95: us(c.Quantile(0.95)), P99: us(c.Quantile(0.99)), Count: c.Total()}
}
