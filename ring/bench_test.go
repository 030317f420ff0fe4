package ring

import (
	"fmt"
	"testing"
)

// benchKey is shaped like a peerlimit counter key: tenant, endpoint pattern,
// method, window start and end, tier.
var benchKey = []byte("tenant-4711|/v1/organizations/{orgId}/product/*|GET|1700000000|1700000010|0")

func BenchmarkOwner(b *testing.B) {
	r := mustNew(b, DefaultConfig(), names(10))
	var sink string
	h := uint64(0x9e3779b97f4a7c15)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sink, _ = r.Owner(h * uint64(i))
	}
	_ = sink
}

func BenchmarkOwnerParallel(b *testing.B) {
	r := mustNew(b, DefaultConfig(), names(10))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		// pb.Next, unlike b.Loop, does not keep results alive: use them,
		// or the compiler drops the lookup.
		var total int
		h := uint64(0x9e3779b97f4a7c15)
		var i uint64
		for ; pb.Next(); i++ {
			o, _ := r.Owner(h * i)
			total += len(o)
		}
		if i > 0 && total == 0 {
			b.Error("no owner found")
		}
	})
}

func BenchmarkLocate(b *testing.B) {
	r := mustNew(b, DefaultConfig(), names(10))
	var sink string
	b.ReportAllocs()
	for b.Loop() {
		sink, _ = r.Locate(benchKey)
	}
	_ = sink
}

// BenchmarkSet measures a full rebuild: each iteration alternates between N
// and N+1 members so that every Set rebuilds. R is the ReplicationFactor.
func BenchmarkSet(b *testing.B) {
	for _, rf := range []int{20, 100} {
		for _, n := range []int{3, 10, 100} {
			b.Run(fmt.Sprintf("R=%d/members=%d", rf, n), func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.ReplicationFactor = rf
				r := mustNew(b, cfg, nil)
				sets := [2][]string{names(n), names(n + 1)}
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if !r.Set(sets[i%2]) {
						b.Fatal("Set did not rebuild")
					}
				}
			})
		}
	}
}
