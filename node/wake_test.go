package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
)

// TestWakeOnNamesTheOwners checks what a pending decision waits for: the
// owners of its series as the ring places them, each once; every call's
// end for a sliding tier (the time alone may admit it) or a series this
// member owns (merged with no call).
func TestWakeOnNamesTheOwners(t *testing.T) {
	c := newCluster(t, 5, PolicyLease)
	e := c.engines["n0"]
	remote, own := -1, -1
	var ls []counters.Limit
	for i := 0; i < 200 && (remote < 0 || own < 0); i++ {
		l := counters.Limit{Tenant: fmt.Sprintf("t%d", i), Endpoint: "/p/*", Method: "GET", Period: 10 * time.Second, Threshold: 100}
		ls = append(ls, l)
		o, _ := e.Ring().Owner(l.Hash())
		if o == "n0" && own < 0 {
			own = i
		} else if o != "n0" && remote < 0 {
			remote = i
		}
	}
	if remote < 0 || own < 0 {
		t.Fatal("no series of each kind among 200")
	}
	want, _ := e.Ring().Owner(ls[remote].Hash())

	owners, every := e.WakeOn(ls[remote:remote+1], nil)
	if !slices.Equal(owners, []string{want}) || every {
		t.Errorf("remote series: got %v every=%v, want [%s] false", owners, every, want)
	}
	// A series listed twice names its owner once.
	twice := []counters.Limit{ls[remote], ls[remote]}
	if owners, _ := e.WakeOn(twice, nil); len(owners) != 1 {
		t.Errorf("the same series twice: got owners %v", owners)
	}
	if _, every := e.WakeOn(ls[own:own+1], nil); !every {
		t.Error("a series this member owns: want every call's end")
	}
	sliding := ls[remote]
	sliding.Algorithm = counters.Sliding
	if _, every := e.WakeOn([]counters.Limit{sliding}, nil); !every {
		t.Error("a sliding tier: want every call's end")
	}
	// dst is appended to, and what it held is kept.
	if owners, _ := e.WakeOn(ls[remote:remote+1], []string{"x"}); !slices.Equal(owners, []string{"x", want}) {
		t.Errorf("appended to [x]: got %v", owners)
	}
}

// TestNodeWakesWaitersByOwner checks the node's wake-ups of waiting
// requests: a call's end wakes those waiting for its owner and those
// waiting for any call, not the others; a round's end wakes everyone.
func TestNodeWakesWaitersByOwner(t *testing.T) {
	n := &Node{roundDone: make(chan struct{}), callWaiters: map[string][]*callWaiter{}}
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	a, roundA := n.nextCall([]string{"a"}, false)
	ab, _ := n.nextCall([]string{"a", "b"}, false)
	b, _ := n.nextCall([]string{"b"}, false)
	any1, _ := n.nextCall(nil, true)
	none, roundNone := n.nextCall(nil, false)
	if none != nil {
		t.Fatal("a waiter for no owner got a call channel")
	}

	n.endCall("c")
	if closed(a) || closed(ab) || closed(b) || !closed(any1) {
		t.Fatalf("after c's call: a=%v ab=%v b=%v any=%v, want only any", closed(a), closed(ab), closed(b), closed(any1))
	}
	n.endCall("a")
	if !closed(a) || !closed(ab) || closed(b) {
		t.Fatalf("after a's call: a=%v ab=%v b=%v, want a and ab", closed(a), closed(ab), closed(b))
	}
	n.endCall("b") // ab again: closed once, no panic
	if !closed(b) {
		t.Fatal("b not woken by b's call")
	}
	if closed(roundA) || closed(roundNone) {
		t.Fatal("round channel closed before the round ended")
	}
	late, round := n.nextCall([]string{"d"}, false)
	n.endRound()
	if !closed(round) || !closed(roundNone) || closed(late) {
		t.Fatalf("after the round: round=%v late call=%v", closed(round), closed(late))
	}
	if len(n.callWaiters) != 0 {
		t.Fatalf("the round's end left %d wait lists", len(n.callWaiters))
	}
}
