package node

import (
	"context"
	"flag"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/internal/cputime"
	"github.com/peerlimit/peerlimit/peerpb"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
)

// BenchmarkAllow compares a decision through a node of a running 3-node
// cluster (sync loop, gossip and gRPC all live) with the bare counters
// decision on a table of the same shape, in one run.
func BenchmarkAllow(b *testing.B) {
	l := counters.Limit{Tenant: "org-1", Endpoint: "/v1/organizations/{orgId}/product/*", Method: "GET", Period: 10 * time.Second, Threshold: 1 << 50}.Prepare()
	limits := []counters.Limit{l}
	b.Run("counters", func(b *testing.B) {
		tb, _ := counters.NewTable(counters.DefaultConfig())
		b.ReportAllocs()
		for b.Loop() {
			tb.Take(time.Now(), limits, 1)
		}
	})
	b.Run("node-3-cluster", func(b *testing.B) {
		c := startCluster(b, 3, clusterOpts{policy: PolicyLease})
		n := c.nodes[0]
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			n.Take(ctx, limits, 1)
		}
	})
	b.Run("node-3-cluster-parallel", func(b *testing.B) {
		c := startCluster(b, 3, clusterOpts{policy: PolicyLease})
		n := c.nodes[0]
		ctx := context.Background()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Take(ctx, limits, 1)
			}
		})
	})
}

// BenchmarkSyncCost measures one sync interval of one instance of a 3-node
// cluster (in memory, no network) with a number of active keys, end to end
// through the wire encoding: the instance prepares its batches, each
// request is marshalled and unmarshalled by the codec gRPC's calls use,
// answered by its owner, the answer marshalled and unmarshalled, and
// applied. It
// reports the calls, the bytes of requests and answers per remote key, and
// the allocations and heap bytes per key (every key: a third are the
// instance's own, merged without a call). Every key is active in every
// interval; the first interval (which creates the owners' windows and, in
// the packed encoding, defines every key to its owner) is not timed.
// Besides ns/op (wall time), cpu-ns/interval is the process's CPU time
// (getrusage: the collector's included), which a machine shared with other
// work disturbs less; prepare-, handle-, apply- and proto-ns/interval cut
// the interval's own work (the collector's not included) into Prepare, the
// owners' Handle, Apply (and Release), and the marshalling, each timed by
// the CPU time of the benchmark's thread (Linux only), which time slices
// taken by other processes do not count in. keys=1000000 is skipped with
// -short, and with a -benchtime of more than 20 iterations (CI's smoke
// run).
//
// In these the keys become active together, so that the first interval
// defines them to their owners in the order the table's walk meets them,
// and each later interval reads every dictionary in order. A service's
// keys become active over time, each defined in the interval of its first
// request, and a walk then meets them in another order than their
// definitions': keys=100000,waves=32 defines them over 32 intervals (a
// thirty-second each, one in 32 of the walk's order), as the 1,000,000-tenant
// test does over a dozen seconds (cmd/peerlimit TestMillionTenants).
func BenchmarkSyncCost(b *testing.B) {
	for _, bc := range []struct{ keys, waves int }{{10, 1}, {1000, 1}, {100_000, 1}, {100_000, 32}, {1_000_000, 1}} {
		keys, waves := bc.keys, bc.waves
		name := "keys=" + strconv.Itoa(keys)
		if waves > 1 {
			name += ",waves=" + strconv.Itoa(waves)
		}
		b.Run(name, func(b *testing.B) {
			if keys > 100_000 && (testing.Short() || fixedIterations() > 20) {
				// CI's smoke run (-benchtime=100x) would spend minutes here.
				b.Skip("a million keys: skipped with -short or -benchtime=Nx above 20x")
			}
			c := newClusterWith(b, 3, func(cfg *EngineConfig) {
				cfg.Policy = PolicyLease
				cfg.Table.MaxEntries = max(cfg.Table.MaxEntries, keys)
				cfg.OwnerWindows = max(200_000, 2*keys)
				cfg.MaxBatch = max(100_000, keys) // every key, every interval
			})
			e := c.engines["n0"]
			limits := make([][]counters.Limit, keys)
			for i := range limits {
				limits[i] = []counters.Limit{{Tenant: "org-" + strconv.Itoa(i), Endpoint: "/v1/p/*", Method: "GET", Period: time.Minute, Threshold: 1 << 40}}
			}
			// In the window after the one the membership began in (t0, 20 s
			// into a minute), so that the owners grant leases as in steady
			// operation (in the first one they hold them back); it holds 290
			// intervals from here, so that no timed one rolls the window
			// over. (Before 2026-11-27 the tier was 10 s and held 40: a
			// faster build ran more iterations and crossed into the next
			// window, timing its new owner windows and definitions.)
			now := t0.Add(42 * time.Second)
			take := func() {
				for _, l := range limits { // every key active in the interval
					e.Take(now, l, 1)
				}
			}
			// Requests and answers go through the codec gRPC's calls use
			// (its proto codec, whose Marshal writes a large message into
			// a pooled buffer, freed once the message is written).
			codec := encoding.GetCodecV2(grpcproto.Name)
			// The phases are timed on this goroutine's thread.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var calls, reqBytes, respBytes, remote int
			var phases [4]time.Duration // prepare, handle, apply, proto
			interval := func() {
				calls, reqBytes, respBytes, remote = 0, 0, 0, 0
				t := cputime.Thread()
				lap := func(phase int) {
					n := cputime.Thread()
					phases[phase] += n - t
					t = n
				}
				bs := e.Prepare(now)
				lap(0)
				for _, bt := range bs {
					calls++
					remote += bt.Len()
					wire, err := codec.Marshal(bt.Req)
					if err != nil {
						b.Fatal(err)
					}
					reqBytes += wire.Len()
					var req peerpb.SyncRequest
					if err := codec.Unmarshal(wire, &req); err != nil {
						b.Fatal(err)
					}
					wire.Free() // as gRPC does once the message is written
					lap(3)
					resp, err := c.engines[bt.Owner].Handle(now, &req)
					if err != nil {
						b.Fatal(err)
					}
					lap(1)
					if wire, err = codec.Marshal(resp); err != nil {
						b.Fatal(err)
					}
					respBytes += wire.Len()
					var back peerpb.SyncResponse
					if err := codec.Unmarshal(wire, &back); err != nil {
						b.Fatal(err)
					}
					wire.Free()
					lap(3)
					if err := e.Apply(now, bt, &back); err != nil {
						b.Fatal(err)
					}
					e.Release(bt)
					lap(2)
				}
			}
			// The other members sync too, as in a running cluster: they
			// hold no keys, so each sends every other member a heartbeat,
			// whose acknowledgements keep it in contact with the owners.
			// Not timed: the interval is n0's. (Before 2026-11-27 they were
			// silent, and every grant took them for out of contact since
			// before the window began, reserving their static shares.)
			// Every member synced since the membership began, n0 too
			// before its keys came.
			for at := t0; at.Before(now); at = at.Add(200 * time.Millisecond) {
				c.sync(at)
			}
			// The first intervals of a key's life are not timed: they create
			// the owners' windows and define the key to its owner (the
			// first batch to a member is unpacked; the second defines).
			if waves > 1 {
				interval() // the first batch to each member, unpacked
				for w := range waves {
					for i, l := range limits {
						if i%waves == w {
							e.Take(now, l, 1)
						}
					}
					interval()
					now = now.Add(time.Millisecond) // not timed: the window must hold the timed ones
				}
			}
			for range 2 {
				take()
				c.syncFrom(now, "n1", "n2")
				interval()
				now = now.Add(200 * time.Millisecond)
			}
			var mallocs, heap uint64
			var cpu time.Duration
			var ms runtime.MemStats
			phases = [4]time.Duration{}
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				take()
				c.syncFrom(now, "n1", "n2")
				runtime.ReadMemStats(&ms)
				m0, h0 := ms.Mallocs, ms.TotalAlloc
				c0 := cputime.Self()
				b.StartTimer()
				interval()
				b.StopTimer()
				cpu += cputime.Self() - c0
				runtime.ReadMemStats(&ms)
				mallocs += ms.Mallocs - m0
				heap += ms.TotalAlloc - h0
				b.StartTimer()
				now = now.Add(200 * time.Millisecond)
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/interval")
			for i, name := range []string{"prepare", "handle", "apply", "proto"} {
				b.ReportMetric(float64(phases[i].Nanoseconds())/float64(b.N), name+"-ns/interval")
			}
			b.ReportMetric(float64(calls), "calls/interval")
			b.ReportMetric(float64(reqBytes)/float64(max(remote, 1)), "req-B/remote-key")
			b.ReportMetric(float64(respBytes)/float64(max(remote, 1)), "resp-B/remote-key")
			b.ReportMetric(float64(remote), "remote-keys/interval")
			b.ReportMetric(float64(mallocs)/float64(b.N)/float64(keys), "allocs/key")
			b.ReportMetric(float64(heap)/float64(b.N)/float64(keys), "heap-B/key")
		})
	}
}

// fixedIterations returns N when the run asked for -benchtime=Nx, else 0.
func fixedIterations() int {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSuffix(f.Value.String(), "x"))
	if err != nil || !strings.HasSuffix(f.Value.String(), "x") {
		return 0
	}
	return n
}

// BenchmarkFirstRequest measures what the lease policy adds to the first
// request of a key on an instance: each iteration is the first request of
// a new tenant on one node of a running 3-node cluster (200 ms sync),
// which waits for the owner's first answer (a sync round it asks for at
// once). A third of the keys are the node's own. back-to-back: first
// requests one after another, so each waits for the next kicked round (at
// most one per 10 ms); spaced: 20 ms apart (not timed), so each waits for
// its own round trip.
func BenchmarkFirstRequest(b *testing.B) {
	c := startCluster(b, 3, clusterOpts{policy: PolicyLease, sync: 200 * time.Millisecond})
	n := c.nodes[0]
	ctx := context.Background()
	i := 0
	for _, spaced := range []bool{false, true} {
		name := "back-to-back"
		if spaced {
			name = "spaced"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if spaced {
					b.StopTimer()
					time.Sleep(20 * time.Millisecond) // shapes the load; nothing waits on it
					b.StartTimer()
				}
				i++
				l := counters.Limit{Tenant: "first-" + strconv.Itoa(i), Endpoint: "/v1/p/*", Method: "GET", Period: time.Hour, Threshold: 1000}
				if d, err := n.Allow(ctx, l); err != nil || !d.Allowed {
					b.Fatalf("first request: %+v, %v", d, err)
				}
			}
		})
	}
}

// BenchmarkPrepareAsking measures a round kicked by a waiting request on a
// member that holds 100,000 active series: each iteration is the first
// request of a new tenant (it waits for its first lease) and the partial
// round that reports it (Engine.PrepareAsking), built and released. Its
// B/op is what such a round allocates, which must follow the series it
// reports, not the table.
func BenchmarkPrepareAsking(b *testing.B) {
	const keys = 100_000
	c := newClusterWith(b, 3, func(cfg *EngineConfig) {
		cfg.Policy = PolicyLease
		cfg.Table.MaxEntries = 20 * keys // the new tenants' too
	})
	e := c.engines["n0"]
	now := t0.Add(12 * time.Second)
	for i := range keys {
		e.Take(now, []counters.Limit{{Tenant: "org-" + strconv.Itoa(i), Endpoint: "/p", Method: "GET", Period: 10 * time.Second, Threshold: 100}}, 1)
	}
	for range 2 { // in contact with the owners, the keys defined
		c.sync(now)
		now = now.Add(200 * time.Millisecond)
	}
	i, sent := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		e.Take(now, []counters.Limit{{Tenant: "new-" + strconv.Itoa(i), Endpoint: "/p", Method: "GET", Period: 10 * time.Second, Threshold: 100}}, 1)
		for _, bt := range e.PrepareAsking(now) {
			sent += bt.Len()
			e.Release(bt)
		}
	}
	// A third of the new tenants are n0's own: merged, with no batch.
	if sent == 0 {
		b.Fatal("no waiting request was reported")
	}
	b.ReportMetric(float64(sent)/float64(b.N), "reports/op")
}
