package counters

import (
	"cmp"
	"slices"
)

// needTree holds the needs of a window's members with demand, ordered by
// need then place, with the count and sum of every subtree: what
// water-filling asks of them (the level, and a member's turn for the
// units left over from the divisions) is then a walk down the tree,
// O(log n), instead of passes over every member (see waterFill). It is a
// treap whose nodes are the members' places in the member window, each
// with a fixed priority drawn from its place, so that the same needs
// always make the same tree.
type needTree struct {
	root  int32
	nodes []needNode // by place
	spine []int32    // build's
}

type needNode struct {
	need        int64
	sum         int64 // of the subtree's needs
	left, right int32 // -1: none
	count       int32 // of the subtree's nodes
	prio        uint32
	in          bool
}

// reset empties the tree for n places.
func (t *needTree) reset(n int) {
	if cap(t.nodes) < n {
		t.nodes = make([]needNode, n)
	}
	t.nodes = t.nodes[:n]
	for i := range t.nodes {
		x := uint64(i+1) * 0x9e3779b97f4a7c15
		x ^= x >> 31
		t.nodes[i] = needNode{left: -1, right: -1, prio: uint32(x >> 32)}
	}
	t.root = -1
}

// set makes place i's need v: in the tree if v is positive (or if keep
// says it is in whatever its need), out of it otherwise.
func (t *needTree) set(i int, v int64, keep bool) {
	nd := &t.nodes[i]
	if nd.in {
		if keep && nd.need == v {
			return
		}
		t.remove(i)
	}
	if keep {
		t.insert(i, v)
	}
}

// has reports whether place i is in the tree, and its need.
func (t *needTree) has(i int) (int64, bool) {
	if i >= len(t.nodes) || !t.nodes[i].in {
		return 0, false
	}
	return t.nodes[i].need, true
}

func (t *needTree) count(x int32) int64 {
	if x < 0 {
		return 0
	}
	return int64(t.nodes[x].count)
}

func (t *needTree) sumOf(x int32) int64 {
	if x < 0 {
		return 0
	}
	return t.nodes[x].sum
}

func (t *needTree) fix(x int32) {
	nd := &t.nodes[x]
	nd.count = int32(1 + t.count(nd.left) + t.count(nd.right))
	nd.sum = nd.need + t.sumOf(nd.left) + t.sumOf(nd.right)
}

// before reports whether node x comes before (v, i): by need, then place.
func (t *needTree) before(x int32, v int64, i int) bool {
	n := t.nodes[x].need
	return n < v || n == v && int(x) < i
}

// split splits subtree x into the nodes before (v, i) and the others.
func (t *needTree) split(x int32, v int64, i int) (int32, int32) {
	if x < 0 {
		return -1, -1
	}
	nd := &t.nodes[x]
	if t.before(x, v, i) {
		l, r := t.split(nd.right, v, i)
		t.nodes[x].right = l
		t.fix(x)
		return x, r
	}
	l, r := t.split(nd.left, v, i)
	t.nodes[x].left = r
	t.fix(x)
	return l, x
}

// merge joins two subtrees, every node of a before every node of b.
func (t *needTree) merge(a, b int32) int32 {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	}
	if t.nodes[a].prio >= t.nodes[b].prio {
		t.nodes[a].right = t.merge(t.nodes[a].right, b)
		t.fix(a)
		return a
	}
	t.nodes[b].left = t.merge(a, t.nodes[b].left)
	t.fix(b)
	return b
}

func (t *needTree) insert(i int, v int64) {
	nd := &t.nodes[i]
	nd.need, nd.in, nd.left, nd.right = v, true, -1, -1
	t.fix(int32(i))
	l, r := t.split(t.root, v, i)
	t.root = t.merge(t.merge(l, int32(i)), r)
}

func (t *needTree) remove(i int) {
	v := t.nodes[i].need
	l, r := t.split(t.root, v, i)
	_, r = t.split(r, v, i+1) // i alone: the nodes before (v, i+1) in r
	t.root = t.merge(l, r)
	t.nodes[i].in = false
}

// rank is how many nodes come before (v, i).
func (t *needTree) rank(v int64, i int) int64 {
	var n int64
	for x := t.root; x >= 0; {
		if t.before(x, v, i) {
			n += t.count(t.nodes[x].left) + 1
			x = t.nodes[x].right
		} else {
			x = t.nodes[x].left
		}
	}
	return n
}

// waterFill is waterFill over the tree's needs: free split among its
// members max-min fair by their needs, then what no one needs in equal
// parts, the units left over one each as waterFill gives them; it
// returns the part of the member at place ri, which must be in the tree.
func (t *needTree) waterFill(free int64, ri int, largest bool) int64 {
	k, sum := t.count(t.root), t.sumOf(t.root)
	v := t.nodes[ri].need
	if sum <= free {
		part, rest := (free-sum)/k, (free-sum)%k
		if t.rank(v, ri) < rest {
			return v + part + 1
		}
		return v + part
	}
	// The first node, in order, whose need is above the level: the one at
	// position m (from 1) with need*(k-m+1) above free less the needs
	// before it. Needs at or under the level come before it, and are met.
	met, metSum := k, sum
	var c, s int64
	for x := t.root; x >= 0; {
		nd := &t.nodes[x]
		m := c + t.count(nd.left) + 1
		pre := s + t.sumOf(nd.left)
		if left := free - pre; left < 0 || nd.need > left/(k-m+1) {
			met, metSum = m-1, pre
			x = nd.left
		} else {
			c, s = m, pre+nd.need
			x = nd.right
		}
	}
	level := (free - metSum) / (k - met)
	if v <= level {
		return v
	}
	rest := free - metSum - level*(k-met)
	// r's turn among the needs above the level (v is one): those before
	// it in order, or with largest those larger than v, then those equal
	// to it at an earlier place.
	turn := t.rank(v, ri) - met
	if largest {
		turn = k - t.rank(v+1, -1) + t.rank(v, ri) - t.rank(v, -1)
	}
	if turn < rest {
		return level + 1
	}
	return level
}

// build makes the tree anew from needs by place: place i is in the tree
// with need needs[i] if in(i). It sorts the places in, then builds the
// treap over them in one pass (a Cartesian tree on the priorities), which
// costs less than inserting them one by one when most needs changed.
func (t *needTree) build(needs []int64, in func(i int) bool, order []int32) []int32 {
	t.reset(len(needs))
	order = order[:0]
	for i, v := range needs {
		if in(i) {
			t.nodes[i].need, t.nodes[i].in = v, true
			order = append(order, int32(i))
		}
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp.Compare(needs[a], needs[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	// The right spine of the tree built so far, root first: a node joins
	// it below the last node of higher priority, taking the lower ones as
	// its left subtree.
	spine := t.spine[:0]
	for _, x := range order {
		last := int32(-1)
		for len(spine) > 0 && t.nodes[spine[len(spine)-1]].prio < t.nodes[x].prio {
			last = spine[len(spine)-1]
			spine = spine[:len(spine)-1]
		}
		t.nodes[x].left = last
		if len(spine) > 0 {
			t.nodes[spine[len(spine)-1]].right = x
		}
		spine = append(spine, x)
	}
	if len(spine) > 0 {
		t.root = spine[0]
		t.fixAll(t.root)
	}
	t.spine = spine[:0]
	return order
}

// fixAll sets the counts and sums of subtree x.
func (t *needTree) fixAll(x int32) {
	if x < 0 {
		return
	}
	t.fixAll(t.nodes[x].left)
	t.fixAll(t.nodes[x].right)
	t.fix(x)
}
