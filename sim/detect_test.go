package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSmallSideSeesTheCutLate checks the lan profile's model of memberlist's
// failure detection by the side a member is left on (Profile.Side): from
// four members on, a member with one, two or three members on its side of
// a cut keeps the members it lost in its view for 10, 6.5 or 4.2 s per
// member lost (plus the detect jitter, under 1 s), and then drops them all;
// the other side (of four members or more here), and every member of a
// cluster of three, within the detect delay (5.5-6.5 s).
func TestSmallSideSeesTheCutLate(t *testing.T) {
	const cut = 10 * time.Second
	for _, c := range []struct {
		instances int
		small     string // the small side, cut off from the rest at 10 s
		late      time.Duration
	}{
		{5, "n4", 40 * time.Second},       // alone, 4 lost: 10 s each
		{6, "n4,n5", 26 * time.Second},    // two, 4 lost: 6.5 s each
		{8, "n5,n6,n7", 21 * time.Second}, // three, 5 lost: 4.2 s each
		{3, "n2", 0},                      // a cluster of three: the detect delay
	} {
		t.Run(fmt.Sprintf("%d/%s", c.instances, c.small), func(t *testing.T) {
			smallNames := strings.Split(c.small, ",")
			var rest []string
			for i := range c.instances {
				if n := fmt.Sprintf("n%d", i); !slices.Contains(smallNames, n) {
					rest = append(rest, n)
				}
			}
			src := fmt.Sprintf("desc detect\ninstances %d\nsync 500ms\nprofile lan\nduration 90s\nsla api fixed:10s:100\ntraffic tenants=a sla=api rate=1x\nat %v partition %s | %s\n", c.instances, cut, strings.Join(rest, ","), c.small)
			w, err := newWorld(scenario(t, src), Lease, 1)
			if err != nil {
				t.Fatal(err)
			}
			nSmall := len(smallNames)
			views := func(at time.Duration) (bigViews, smallViews []int) {
				t.Helper()
				if err := w.runUntil(int64(at)); err != nil {
					t.Fatal(err)
				}
				for _, in := range w.insts {
					if slices.Contains(smallNames, in.name) {
						smallViews = append(smallViews, len(in.view))
					} else {
						bigViews = append(bigViews, len(in.view))
					}
				}
				return bigViews, smallViews
			}
			all := func(v []int, n int) bool { return !slices.ContainsFunc(v, func(x int) bool { return x != n }) }
			big, sm := views(cut + 6500*time.Millisecond)
			if !all(big, c.instances-nSmall) {
				t.Errorf("6.5 s after the cut, the large side's views hold %v members, want %d", big, c.instances-nSmall)
			}
			if c.late == 0 {
				if !all(sm, nSmall) {
					t.Errorf("6.5 s after the cut, the small side's views hold %v members, want %d", sm, nSmall)
				}
				return
			}
			if _, sm = views(cut + c.late - 10*time.Millisecond); !all(sm, c.instances) {
				t.Errorf("%v after the cut, the small side's views hold %v members, want all %d still", c.late-10*time.Millisecond, sm, c.instances)
			}
			if _, sm = views(cut + c.late + time.Second); !all(sm, nSmall) {
				t.Errorf("%v after the cut, the small side's views hold %v members, want %d", c.late+time.Second, sm, nSmall)
			}
		})
	}
}

// A cut that heals before the small side noticed it leaves that side's
// views whole.
func TestSmallSideHealedBeforeItNoticed(t *testing.T) {
	src := "desc detect\ninstances 5\nsync 500ms\nprofile lan\nduration 60s\nsla api fixed:10s:100\ntraffic tenants=a sla=api rate=1x\nat 10s isolate n4\nat 30s heal\n"
	w, err := newWorld(scenario(t, src), Lease, 1)
	if err != nil {
		t.Fatal(err)
	}
	n4 := w.byName["n4"]
	for at := 11 * time.Second; at < 60*time.Second; at += time.Second {
		if err := w.runUntil(int64(at)); err != nil {
			t.Fatal(err)
		}
		if len(n4.view) != 5 {
			t.Fatalf("at %v, n4's view holds %v, want all five throughout", at, n4.view)
		}
	}
	if len(w.byName["n0"].view) != 5 {
		t.Errorf("after the heal, n0's view holds %v, want all five", w.byName["n0"].view)
	}
}

// Another membership change that the small side hears of before it notices
// the cut (a member joining on the other side, which it cannot see) does
// not make it drop the members it lost earlier than the model says.
func TestSmallSideKeepsItsViewThroughOtherChanges(t *testing.T) {
	src := "desc detect\ninstances 5\nsync 500ms\nprofile lan\nduration 60s\nsla api fixed:10s:100\ntraffic tenants=a sla=api rate=1x\nat 10s isolate n4\nat 15s join n5\n"
	w, err := newWorld(scenario(t, src), Lease, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.runUntil(int64(25 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if v, want := w.byName["n4"].view, []string{"n0", "n1", "n2", "n3", "n4"}; !slices.Equal(v, want) {
		t.Errorf("at 25 s, n4's view is %v, want %v", v, want)
	}
	if err := w.runUntil(int64(52 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if v := w.byName["n4"].view; !slices.Equal(v, []string{"n4"}) {
		t.Errorf("at 52 s, n4's view is %v, want itself alone", v)
	}
}
