package demo

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrBadPartition is returned (wrapped) for a partition spec that does not
// parse.
var ErrBadPartition = errors.New("demo: bad partition")

// Partition is a split of the cluster into groups that cannot talk to each
// other: traffic flows inside a group, never between two. The zero value
// (no groups) is a healed network.
type Partition [][]string

// ParsePartition parses a spec such as "n1,n2|n3" (braces allowed:
// "{n1,n2}|{n3}") against the node names of the cluster. Nodes the spec
// does not list form one more group together, so "n3" alone isolates n3
// from the rest. An empty spec (or "heal") is the healed network. The
// result lists groups in a canonical order (each sorted, groups by first
// member), so that equal splits compare equal as strings.
func ParsePartition(spec string, all []string) (Partition, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "heal" {
		return nil, nil
	}
	known := map[string]bool{}
	for _, n := range all {
		known[n] = true
	}
	seen := map[string]bool{}
	var p Partition
	for _, g := range strings.Split(spec, "|") {
		g = strings.TrimSpace(g)
		g = strings.TrimSuffix(strings.TrimPrefix(g, "{"), "}")
		var group []string
		for _, n := range strings.Split(g, ",") {
			n = strings.TrimSpace(n)
			switch {
			case n == "":
				return nil, fmt.Errorf("%w %q: empty node name", ErrBadPartition, spec)
			case !known[n]:
				return nil, fmt.Errorf("%w %q: %w %q", ErrBadPartition, spec, ErrUnknownNode, n)
			case seen[n]:
				return nil, fmt.Errorf("%w %q: node %s is in two groups", ErrBadPartition, spec, n)
			}
			seen[n] = true
			group = append(group, n)
		}
		p = append(p, group)
	}
	var rest []string
	for _, n := range all {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	if len(rest) > 0 {
		p = append(p, rest)
	}
	if len(p) < 2 {
		return nil, nil // one group: nothing is cut
	}
	for _, g := range p {
		slices.Sort(g)
	}
	slices.SortFunc(p, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return p, nil
}

// String returns the canonical spec ("n1,n2|n3"), or "" for no partition.
func (p Partition) String() string {
	parts := make([]string, len(p))
	for i, g := range p {
		parts[i] = strings.Join(g, ",")
	}
	return strings.Join(parts, "|")
}

// Cut calls cut for every pair of groups; cut is typically
// (*faultnet.Table).Cut.
func (p Partition) Cut(cut func(a, b []string)) {
	for i := range p {
		for j := i + 1; j < len(p); j++ {
			cut(p[i], p[j])
		}
	}
}

// Group returns the group that holds name, or nil.
func (p Partition) Group(name string) []string {
	for _, g := range p {
		if slices.Contains(g, name) {
			return g
		}
	}
	return nil
}
