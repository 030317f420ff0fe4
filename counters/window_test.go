package counters

import (
	"math"
	"testing"
	"time"
)

func ms(v int64) time.Time { return time.UnixMilli(v) }

func TestWindowSeedExample(t *testing.T) {
	// Seed 000: 162731878077 ms falls in 162731870000..162731880000 for a
	// 10 s window, and so does 162731878177.
	for _, now := range []int64{162731878077, 162731878177, 162731870000, 162731879999} {
		start, end := Window(ms(now), 10*time.Second)
		if got, want := start.UnixMilli(), int64(162731870000); got != want {
			t.Errorf("Window(%d).start = %d, want %d", now, got, want)
		}
		if got, want := end.UnixMilli(), int64(162731880000); got != want {
			t.Errorf("Window(%d).end = %d, want %d", now, got, want)
		}
	}
}

func TestWindowStartBoundaries(t *testing.T) {
	const p = int64(10)
	for _, tc := range []struct{ now, want int64 }{
		{0, 0}, {9, 0}, {10, 10}, {11, 10}, {19, 10}, {20, 20},
		{-1, -10}, {-10, -10}, {-11, -20}, // floor before the epoch, not truncation
	} {
		if got := WindowStart(tc.now, p); got != tc.want {
			t.Errorf("WindowStart(%d, %d) = %d, want %d", tc.now, p, got, tc.want)
		}
	}
}

func TestParseAlgorithm(t *testing.T) {
	for in, want := range map[string]Algorithm{"": Fixed, "fixed": Fixed, "sliding": Sliding} {
		got, err := ParseAlgorithm(in)
		if err != nil || got != want {
			t.Errorf("ParseAlgorithm(%q) = %v, %v; want %v", in, got, err, want)
		}
		if in != "" && got.String() != in {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	if _, err := ParseAlgorithm("leaky"); err == nil {
		t.Error("ParseAlgorithm(leaky) succeeded")
	}
}

func TestSeriesHashSeparatesFields(t *testing.T) {
	a := SeriesHash("ab", "c", "GET", time.Second)
	b := SeriesHash("a", "bc", "GET", time.Second)
	c := SeriesHash("ab", "c", "GET", 2*time.Second)
	if a == b || a == c {
		t.Fatalf("hash collision between distinct series: %x %x %x", a, b, c)
	}
	if a != SeriesHash("ab", "c", "GET", time.Second) {
		t.Fatal("hash is not deterministic")
	}
}

func TestPreparedLimitHashesTheSame(t *testing.T) {
	l := Limit{Tenant: "org-9", Endpoint: "/p/*", Method: "PUT", Period: 10 * time.Second}
	p := l.Prepare()
	if l.Hash() != p.Hash() || p.Hash() != SeriesHash("org-9", "/p/*", "PUT", 10*time.Second) {
		t.Fatal("prepared and unprepared limits hash differently")
	}
	k := Key{Tenant: "org-9", Endpoint: "/p/*", Method: "PUT", Period: 10 * time.Second, WindowStart: 42}
	if k.SeriesHash() != l.Hash() {
		t.Fatal("Key and Limit of one series hash differently")
	}
	// Swapping fields must change the hash.
	if SeriesHash("a", "b", "c", 1) == SeriesHash("b", "a", "c", 1) || SeriesHash("a", "b", "c", 1) == SeriesHash("a", "c", "b", 1) {
		t.Fatal("hash is symmetric in its fields")
	}
}

// TestStamp holds Slot.GlobalAt to what stamp promises: exact to the
// millisecond within about 24 days of the window's start, never later than
// the time recorded, and 0 only for never.
func TestStamp(t *testing.T) {
	const milli = int64(time.Millisecond)
	start := at(time.Hour).UnixNano()
	for _, tc := range []struct {
		name   string
		ns     int64
		want   int64
		later  bool // want is later than ns (clamped)
		atZero bool // the window starts at Unix 0
	}{
		{"never", 0, 0, false, false},
		{"at the start", start, start, false, false},
		{"a millisecond in", start + milli, start + milli, false, false},
		{"between milliseconds", start + 5*milli + 999_999, start + 5*milli, false, false},
		{"before the start", start - 3*milli, start - 3*milli, false, false},
		{"between milliseconds before the start", start - 3*milli + 1, start - 3*milli, false, false},
		{"a day in", start + 24*int64(time.Hour), start + 24*int64(time.Hour), false, false},
		{"past 24 days", start + 30*24*int64(time.Hour), start + int64(math.MaxInt32-1)*milli, false, false},
		{"24 days before", start - 30*24*int64(time.Hour), start + int64(math.MinInt32)*milli, true, false},
		{"Unix 1 ns, a test's 'answered'", 1, start + int64(math.MinInt32)*milli, true, false},
		{"in the first millisecond of a window at Unix 0", 5, 1, true, true},
	} {
		s := Slot{Start: start}
		if tc.atZero {
			s.Start = 0
		}
		s.SetGlobalAt(tc.ns)
		if got := s.GlobalAt(); got != tc.want {
			t.Errorf("%s: SetGlobalAt(%d) reads %d, want %d", tc.name, tc.ns, got, tc.want)
		}
		if tc.ns != 0 && s.GlobalAt() == 0 {
			t.Errorf("%s: a time recorded reads as never", tc.name)
		}
		if !tc.later && s.GlobalAt() > tc.ns {
			t.Errorf("%s: reads %d, later than %d", tc.name, s.GlobalAt(), tc.ns)
		}
	}
}
