package counters

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// waterFillSorted is the water-filling walk through the needs in
// increasing order (by need, then place), as waterFill computed it before
// it stopped sorting: the reference TestWaterFillMatchesSortedWalk holds
// waterFill to.
func waterFillSorted(free int64, needs []int64, order []int, ri int, largest bool) int64 {
	// By need, then by place: the order a stable sort gives, from a
	// faster one (order is ascending when it arrives).
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(needs[a], needs[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	// Water-filling in increasing need: each origin gets its need or an
	// equal part of what is left, whichever is smaller; the units left over
	// from the division go one each, in that order (with largest, to the
	// largest needs first).
	remaining, active := free, int64(len(order))
	for j, i := range order {
		part := remaining / active
		if needs[i] <= part {
			remaining -= needs[i]
			active--
			continue
		}
		// The water level: every origin from here on gets part, and the
		// units left over go one each in order.
		rest := remaining - part*active
		above := slices.Clone(order[j:])
		if largest {
			slices.SortFunc(above, func(a, b int) int {
				if c := cmp.Compare(needs[b], needs[a]); c != 0 {
					return c
				}
				return cmp.Compare(a, b)
			})
		}
		for jj, i := range above {
			if i == ri {
				if int64(jj) < rest {
					return part + 1
				}
				return part
			}
		}
		return needs[ri] // r's need was met below the level
	}
	// Every need met: what is left goes to the origins with demand, in equal
	// parts, the units left over one each in order.
	with := int64(len(order))
	part, rest := remaining/with, remaining%with
	for j, i := range order {
		if i == ri {
			if int64(j) < rest {
				return needs[ri] + part + 1
			}
			return needs[ri] + part
		}
	}
	return needs[ri]
}

// TestWaterFillMatchesSortedWalk: over random needs (small and large, many
// ties, some origins without demand), waterFill gives every origin the part
// the sorted walk gives it, and the parts add up to free, or to the needs
// plus what is left when every need is met.
func TestWaterFillMatchesSortedWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for c := range 20000 {
		k := 1 + rng.IntN(40)
		needs := make([]int64, k)
		span := []int64{3, 20, 1000}[rng.IntN(3)]
		for i := range needs {
			if rng.IntN(5) > 0 {
				needs[i] = rng.Int64N(span)
			}
		}
		var order []int
		for i, n := range needs {
			if n > 0 {
				order = append(order, i)
			}
		}
		if len(order) == 0 {
			continue
		}
		free := rng.Int64N(span * int64(k))
		var total int64
		for _, ri := range order {
			largest := c%2 == 1
			got := waterFill(free, needs, slices.Clone(order), ri, largest)
			want := waterFillSorted(free, needs, slices.Clone(order), ri, largest)
			if got != want {
				t.Fatalf("case %d: free %d needs %v: origin %d gets %d, the sorted walk %d", c, free, needs, ri, got, want)
			}
			total += got
		}
		if total != free {
			t.Fatalf("case %d: free %d needs %v: parts add up to %d", c, free, needs, total)
		}
	}
}

// TestNeedTreeMatchesWaterFill: a needTree built and changed one need at a
// time (members gaining, losing and changing demand, some in the order
// with no need, as in fairShare's second pass) gives every member the part
// waterFill gives it over the same needs.
func TestNeedTreeMatchesWaterFill(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var tree needTree
	for c := range 300 {
		n := 1 + rng.IntN(60)
		span := []int64{3, 20, 1000, 1 << 40}[rng.IntN(4)]
		needs, in := make([]int64, n), make([]bool, n)
		tree.reset(n)
		for step := range 40 {
			i := rng.IntN(n)
			switch rng.IntN(4) {
			case 0:
				needs[i], in[i] = 0, false
			case 1:
				needs[i], in[i] = 0, true // in the order without a need
			default:
				needs[i], in[i] = 1+rng.Int64N(span), true
			}
			tree.set(i, needs[i], in[i])
			var order []int
			for j := range needs {
				if in[j] {
					order = append(order, j)
				}
			}
			if tree.count(tree.root) != int64(len(order)) {
				t.Fatalf("case %d step %d: %d nodes, %d members in", c, step, tree.count(tree.root), len(order))
			}
			if len(order) == 0 {
				continue
			}
			free := rng.Int64N(min(span, 1<<20) * int64(n+1))
			for _, ri := range order {
				largest := step%2 == 1
				got, want := tree.waterFill(free, ri, largest), waterFill(free, needs, slices.Clone(order), ri, largest)
				if got != want {
					t.Fatalf("case %d step %d: free %d needs %v (in %v): member %d gets %d from the tree, %d from waterFill", c, step, free, needs, in, ri, got, want)
				}
			}
		}
	}
}
