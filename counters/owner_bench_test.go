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

// BenchmarkOwnerReportBusy is BenchmarkOwnerReport as a busy window sees
// it: the limit (ten per origin) below the origins' demand, each origin
// reporting once per sync interval (200 ms) with its count grown to its
// cap and acknowledging the answer before the next origin's report, the
// time moving on by an interval over the origins' reports, and the
// window rolling every 2 s: the owner re-weighs what depends on the
// time, takes slots again at acknowledgements and splits a limit under
// contention. Two windows' reports come before the timed ones.
func BenchmarkOwnerReportBusy(b *testing.B) {
	for _, n := range []int{10, 100, 500} {
		b.Run("origins="+strconv.Itoa(n), func(b *testing.B) {
			const interval = 200 * time.Millisecond
			o := NewOwner(OwnerConfig{Lease: true, Self: "o", Contact: 3 * interval, Interval: interval, MaxWindows: 10})
			names := make([]string, n)
			for i := range names {
				names[i] = "m" + strconv.Itoa(i)
			}
			o.SetMembers(base, names, nil)
			type held struct {
				start, own, cap int64
				grant           bool
			}
			hs := make([]held, n)
			step := interval / time.Duration(n)
			now := base
			i := 0
			report := func() {
				m := i % n
				i++
				now = now.Add(step)
				k := ownerKey()
				k.Period = 2 * time.Second
				k.WindowStart = now.Truncate(k.Period).UnixNano()
				h := &hs[m]
				if h.start != k.WindowStart {
					*h = held{start: k.WindowStart}
				}
				h.own = max(h.own, min(h.own+5, h.cap))
				if !h.grant {
					h.own++
				}
				seq := o.Hello(now, names[m])
				a := o.Report(now, names[m], 1, &Report{Key: k, Threshold: int64(10 * n), Own: h.own, Demand: 5, Cap: h.cap, HasGrant: h.grant})
				if a.HasGrant {
					h.cap, h.grant = a.Grant, true
				}
				o.Acknowledge(now, names[m], seq, o.view, true)
			}
			for range 20 * n { // two windows first: every origin known, caps granted
				report()
			}
			b.ReportAllocs()
			for b.Loop() {
				report()
			}
		})
	}
}
