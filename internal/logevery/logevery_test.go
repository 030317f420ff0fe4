package logevery

import (
	"testing"
	"time"
)

func TestAllowOncePerKeyAndInterval(t *testing.T) {
	l := New(time.Minute)
	t0 := time.Unix(1_700_000_000, 0)
	for i, tc := range []struct {
		key  string
		at   time.Duration
		want bool
	}{
		{"a", 0, true},
		{"a", time.Second, false},
		{"b", time.Second, true},
		{"a", 59 * time.Second, false},
		{"a", time.Minute, true},
		{"b", time.Minute, false},
	} {
		if got := l.Allow(tc.key, t0.Add(tc.at)); got != tc.want {
			t.Errorf("step %d: Allow(%q, +%v) = %v, want %v", i, tc.key, tc.at, got, tc.want)
		}
	}
}
