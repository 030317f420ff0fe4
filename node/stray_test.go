package node

import (
	"strings"
	"testing"

	"github.com/peerlimit/peerlimit/peerpb"
)

// TestDeclineAfterRefusesMalformedLists: an answer's stray lists come from
// a peer; lists that do not match the batch are refused (the batch fails,
// and goes again), never read out of range.
func TestDeclineAfterRefusesMalformedLists(t *testing.T) {
	c := newCluster(t, 3, PolicyLease)
	e := c.engines["n0"]
	for _, tc := range []struct {
		name    string
		reports []uint32
		owners  []string
		n       int
		bad     bool
	}{
		{"none", nil, nil, 3, false},
		{"one", []uint32{1}, []string{"n2"}, 3, false},
		{"lengths differ", []uint32{1, 2}, []string{"n2"}, 3, true},
		{"more than the reports", []uint32{0, 1}, []string{"n1", "n2"}, 1, true},
		{"out of range", []uint32{3}, []string{"n2"}, 3, true},
		{"out of order", []uint32{2, 1}, []string{"n2", "n2"}, 3, true},
		{"repeated", []uint32{1, 1}, []string{"n2", "n2"}, 3, true},
		{"empty owner", []uint32{0}, []string{""}, 3, true},
		{"owner too long", []uint32{0}, []string{strings.Repeat("x", MaxOriginSize+1)}, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after, err := e.declineAfter(&peerpb.SyncResponse{StrayReports: tc.reports, StrayOwners: tc.owners}, tc.n)
			if (err != nil) != tc.bad {
				t.Fatalf("error %v, want one: %v", err, tc.bad)
			}
			if err == nil && len(tc.reports) > 0 && len(after) != tc.n {
				t.Errorf("%d values for %d reports", len(after), tc.n)
			}
		})
	}
}
