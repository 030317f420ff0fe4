package counters

import (
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// TestHeapPerSeries measures the heap a table holds per series, filled to
// MaxEntries with one-tier series of realistic names (the figure
// Config.MaxEntries' doc states), and fails if it grows past the bound
// below. -short measures 100,000 series instead of 1,000,000.
func TestHeapPerSeries(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation sizes; .ci/run runs this without it")
	}
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	cfg := DefaultConfig()
	cfg.MaxEntries = n
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tb, err := NewTable(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := Limit{Endpoint: "/v1/organizations/{orgId}/product/{id}", Method: "PUT", Period: 10 * time.Second, Threshold: 100}
	buf := make([]byte, 0, 32)
	for i := 0; i < n; i++ {
		buf = fmt.Appendf(buf[:0], "tenant-%08d", i)
		l.Tenant = string(buf)
		if !tb.Allow(at(time.Second), l) {
			t.Fatalf("series %d denied", i)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	t.Logf("%d series: %.0f bytes of heap per series", tb.Len(), per)
	if per > 530 {
		t.Errorf("%.0f bytes per series, more than the 530 recorded (481 measured at 1,000,000)", per)
	}
	runtime.KeepAlive(tb)
}

// TestStructSizes holds the structs a table keeps per series to the sizes
// their layout was chosen for: a field that breaks a packed word, or one
// more, shows here before it shows in TestHeapPerSeries.
func TestStructSizes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want uintptr
	}{
		{"Slot", unsafe.Sizeof(Slot{}), 96},
	} {
		if tc.got != tc.want {
			t.Errorf("unsafe.Sizeof(%s) = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

// TestPeerID checks that a table names every member run by one id, tells
// runs of one member apart, and resolves ids back.
func TestPeerID(t *testing.T) {
	tb, err := NewTable(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if id := tb.PeerID("", 0); id != 0 {
		t.Errorf(`PeerID("", 0) = %d, want 0`, id)
	}
	a1, a2, b1 := tb.PeerID("a", 1), tb.PeerID("a", 2), tb.PeerID("b", 1)
	if a1 == 0 || a1 == a2 || a1 == b1 || a2 == b1 {
		t.Fatalf("ids a/1 %d, a/2 %d, b/1 %d: want distinct and non-zero", a1, a2, b1)
	}
	if id := tb.PeerID(string([]byte("a")), 1); id != a1 {
		t.Errorf("a/1 again: id %d, want %d", id, a1)
	}
	for _, tc := range []struct {
		id   PeerID
		name string
		inc  uint64
	}{{0, "", 0}, {a1, "a", 1}, {a2, "a", 2}, {b1, "b", 1}, {b1 + 1, "", 0}} {
		if name, inc := tb.Peer(tc.id); name != tc.name || inc != tc.inc {
			t.Errorf("Peer(%d) = %q/%d, want %q/%d", tc.id, name, inc, tc.name, tc.inc)
		}
	}
}
