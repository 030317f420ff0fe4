package counters

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkOwnerReport measures an owner's work for one report of one key
// (the lease grant included) with a number of origins all reporting the
// key: each iteration is the report of the next origin, in contact.
func BenchmarkOwnerReport(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		b.Run("origins="+strconv.Itoa(n), func(b *testing.B) {
			o := NewOwner(OwnerConfig{Lease: true, Self: "o", Contact: time.Hour, MaxWindows: 10})
			names := make([]string, n)
			for i := range names {
				names[i] = "m" + strconv.Itoa(i)
			}
			o.SetMembers(base, names, nil)
			k := ownerKey()
			r := &Report{Key: k, Threshold: 1 << 40, Own: 1, Demand: 1}
			acks := make([]uint64, n)
			now := base.Add(time.Second)
			for i := range names { // everyone in contact, everyone reported once
				seq := o.Hello(now, names[i])
				o.Report(now, names[i], 1, r)
				o.Acknowledge(now, names[i], acks[i], o.view, true)
				acks[i] = seq
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				m := i % n
				i++
				r.Own = int64(i/n + 1)
				o.Report(now, names[m], 1, r)
			}
		})
	}
}
