package node

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/peerpb"
)

// TestEngineLeaseHoldsUnderInterleavings: whatever the order in which the
// members build their syncs, the owners count them and the members apply
// the answers, with requests decided at every member in between, a lease
// cluster never admits more than the limit in a window. Each member has at
// most one round in flight, full or asked for at once, as the node's sync
// loop does; the owner counts each of its batches, and the member applies
// each answer, at random later steps. Four series, two owned by n0 and two
// by n1 (a member merges the ones it owns with no call), and the requests
// mostly at one member, a different one every few hundred steps, so that
// caps move between members. The orders that let TestMillionTenants admit
// 110 of 100 are of this kind: at fef676a, before the fix, the hour-long
// window's seed 118 admits 201 of 200; 5,000 seeds pass now (200 run
// here). The second case has 2 s sliding windows, and cuts n2 off from
// the others for a while (its calls fail both ways; the membership does
// not change).
//
// The third has a fourth member join halfway, so that series change
// owners in the window. Two fixes made it hold (1,000 seeds pass; 200
// run here):
//   - the member that joins no longer takes its first view, alone at the
//     epoch, as ownership of every series since then: the new owner
//     granted itself the whole limit at its first merge (47 of 1,000
//     seeds went over, up to 293 of 200);
//   - a new owner no longer counts itself as synced with the view at
//     once: in a series it took over, the cap its own entry held from the
//     previous owner was not reserved until its next merge (6 of 1,000
//     seeds went over, up to 206 of 200; seed 128 admits 201). It counts
//     as synced once a full round has merged its own windows under the
//     view (Engine.Prepare's Owner.Acknowledge).
func TestEngineLeaseHoldsUnderInterleavings(t *testing.T) {
	cases := []interleaving{
		{name: "hour", period: time.Hour, steps: 4000, seeds: 200},
		{name: "sliding-2s-cut", period: 2 * time.Second, alg: counters.Sliding, steps: 6000, seeds: 100, cut: [2]int{1500, 3000}},
		{name: "hour-join", period: time.Hour, steps: 4000, seeds: 200, join: 2000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seeds := tc.seeds
			if testing.Short() {
				seeds /= 10
			}
			for seed := range seeds {
				if most := tc.run(t, uint64(seed)); most > interleavingLimit {
					t.Fatalf("seed %d: admitted %d of a limit of %d in a window", seed, most, interleavingLimit)
				}
			}
		})
	}
}

// interleavingLimit is the limit of TestEngineLeaseHoldsUnderInterleavings'
// series.
const interleavingLimit = 200

// interleaving is one case of TestEngineLeaseHoldsUnderInterleavings: the
// series' period and algorithm, steps per seed, seeds, the steps between
// which n2 is cut off (none if both are 0) and the step at which n3 joins
// (0: none).
type interleaving struct {
	name         string
	period       time.Duration
	alg          counters.Algorithm
	steps, seeds int
	cut          [2]int
	join         int
}

type flight struct {
	bs      []*Batch
	resps   []*peerpb.SyncResponse // nil: the call failed
	applied int
}

// run runs one seed and returns the most a window admitted.
func (tc interleaving) run(t *testing.T, seed uint64) (most int64) {
	const limit = interleavingLimit
	rng := rand.New(rand.NewPCG(seed, 7))
	c := newCluster(t, 3, PolicyLease)
	es := []*Engine{c.engines["n0"], c.engines["n1"], c.engines["n2"]}
	var ls [][]counters.Limit
	for i, want := 0, []string{"n0", "n1", "n0", "n1"}; len(ls) < len(want); i++ {
		l := counters.Limit{Tenant: fmt.Sprintf("t%d", i), Endpoint: "/p/*", Method: "GET", Period: tc.period, Threshold: limit, Algorithm: tc.alg}
		if o, _ := es[0].ring.Owner(l.Hash()); o == want[len(ls)] {
			ls = append(ls, []counters.Limit{l})
		}
	}
	type window struct {
		series int
		n      int64
	}
	admitted := map[window]int64{}
	inflight := map[*Engine]*flight{}
	now := t0.Add(10*time.Second + 100*time.Millisecond)
	c.sync(now)
	for step := range tc.steps {
		now = now.Add(time.Duration(rng.IntN(30)) * time.Millisecond)
		if tc.cut != [2]int{} {
			switch step {
			case tc.cut[0]:
				c.partition([]string{"n2"}, []string{"n0", "n1"})
			case tc.cut[1]:
				clear(c.cut)
			}
		}
		if tc.join != 0 && step == tc.join {
			n3, err := NewEngine(EngineConfig{Name: "n3", Incarnation: 1, Table: counters.DefaultConfig(), Ring: ringDefault(), Policy: PolicyLease})
			if err != nil {
				t.Fatal(err)
			}
			c.engines["n3"] = n3
			c.names = append(c.names, "n3")
			c.setMembers(now, c.names...)
			es = append(es, n3)
		}
		e := es[rng.IntN(len(es))]
		switch rng.IntN(6) {
		case 0, 1, 2: // requests, most of them at the member hot in this phase
			if rng.IntN(4) != 0 {
				e = es[step/300%len(es)]
			}
			k := rng.IntN(len(ls))
			for range rng.IntN(4) + 1 {
				if d, _ := e.Take(now, ls[k], 1); d.Allowed {
					w := window{k, now.UnixNano() / int64(tc.period)}
					admitted[w]++
					most = max(most, admitted[w])
				}
			}
		case 3: // a round begins, unless one is in flight
			if inflight[e] == nil {
				var bs []*Batch
				if rng.IntN(3) == 0 {
					bs = e.Prepare(now)
				} else {
					bs = e.PrepareAsking(now)
				}
				if len(bs) > 0 {
					inflight[e] = &flight{bs: bs}
				}
			}
		default: // the round goes on: an owner counts the next batch, or the member applies the next answer
			f := inflight[e]
			if f == nil {
				continue
			}
			if n := len(f.resps); n < len(f.bs) {
				var resp *peerpb.SyncResponse
				if !c.cut[[2]string{e.Name(), f.bs[n].Owner}] {
					var err error
					if resp, err = c.engines[f.bs[n].Owner].Handle(now, f.bs[n].Req); err != nil {
						t.Fatalf("seed %d step %d: %v", seed, step, err)
					}
				}
				f.resps = append(f.resps, resp)
				continue
			}
			b := f.bs[f.applied]
			if resp := f.resps[f.applied]; resp == nil {
				e.Fail(now, b)
			} else if err := e.Apply(now, b, resp); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			e.Release(b)
			if f.applied++; f.applied == len(f.bs) {
				delete(inflight, e)
			}
		}
	}
	return most
}
