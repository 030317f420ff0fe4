package ring

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

// names returns "node-1" … "node-n".
func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("node-%d", i+1)
	}
	return out
}

// randomNames returns n distinct random names shaped like memberlist
// addresses.
func randomNames(rng *rand.Rand, n int) []string {
	seen := make(map[string]bool, n)
	out := make([]string, 0, n)
	for len(out) < n {
		s := fmt.Sprintf("10.%d.%d.%d:7946", rng.IntN(256), rng.IntN(256), rng.IntN(256))
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// randomKeys returns n random keys of 8 to 40 bytes.
func randomKeys(rng *rand.Rand, n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		k := make([]byte, 8+rng.IntN(33))
		for j := range k {
			k[j] = byte(rng.Uint32())
		}
		keys[i] = k
	}
	return keys
}

func mustNew(t testing.TB, cfg Config, members []string) *Ring {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	r.Set(members)
	return r
}

// testConfigs are the shapes every property is checked on.
var testConfigs = []Config{
	DefaultConfig(),
	{PartitionCount: 271, ReplicationFactor: 20, Load: 1.25},
	{PartitionCount: 71, ReplicationFactor: 2, Load: 1.1},
	{PartitionCount: 1, ReplicationFactor: 2, Load: 1.1},
}

var testMemberCounts = []int{1, 2, 3, 4, 10, 11, 64}

func TestEmptyRing(t *testing.T) {
	r := mustNew(t, DefaultConfig(), nil)
	check := func(step string) {
		t.Helper()
		if got, ok := r.Owner(42); got != "" || ok {
			t.Errorf("%s: Owner(42) = %q, %v, want \"\", false", step, got, ok)
		}
		if got, ok := r.Locate([]byte("tenant/a")); got != "" || ok {
			t.Errorf("%s: Locate = %q, %v, want \"\", false", step, got, ok)
		}
		if got := r.Members(); len(got) != 0 {
			t.Errorf("%s: Members() = %q, want none", step, got)
		}
	}
	check("new")
	if r.Version() != 0 {
		t.Errorf("new: Version() = %d, want 0", r.Version())
	}
	if r.Set([]string{"", ""}) {
		t.Errorf("Set of empty names changed an empty ring")
	}
	check("empty names")
	r.Set([]string{"a"})
	r.Set(nil)
	check("emptied")
	if r.Version() != 2 {
		t.Errorf("emptied: Version() = %d, want 2", r.Version())
	}
}

// TestSetTimeline replays a sequence of membership reports.
func TestSetTimeline(t *testing.T) {
	r := mustNew(t, DefaultConfig(), nil)
	steps := []struct {
		set         []string
		wantChanged bool
		wantMembers []string
		wantVersion uint64
	}{
		0: {nil, false, nil, 0},
		1: {[]string{"b", "a"}, true, []string{"a", "b"}, 1},
		2: {[]string{"a", "b"}, false, []string{"a", "b"}, 1},
		3: {[]string{"b", "a", "b", ""}, false, []string{"a", "b"}, 1},
		4: {[]string{"c", "a", "b"}, true, []string{"a", "b", "c"}, 2},
		5: {[]string{"c"}, true, []string{"c"}, 3},
		6: {[]string{"c", "c"}, false, []string{"c"}, 3},
		7: {[]string{}, true, nil, 4},
		8: {nil, false, nil, 4},
		9: {[]string{"a"}, true, []string{"a"}, 5},
	}
	for i, st := range steps {
		in := slices.Clone(st.set)
		if got := r.Set(in); got != st.wantChanged {
			t.Errorf("step %d: Set(%q) = %v, want %v", i, st.set, got, st.wantChanged)
		}
		if !slices.Equal(in, st.set) {
			t.Errorf("step %d: Set modified its argument: %q, was %q", i, in, st.set)
		}
		if got := r.Members(); !slices.Equal(got, st.wantMembers) {
			t.Errorf("step %d: Members() = %q, want %q", i, got, st.wantMembers)
		}
		if got := r.Version(); got != st.wantVersion {
			t.Errorf("step %d: Version() = %d, want %d", i, got, st.wantVersion)
		}
		_, ok := r.Owner(uint64(i))
		if want := len(st.wantMembers) > 0; ok != want {
			t.Errorf("step %d: Owner ok = %v, want %v", i, ok, want)
		}
	}
}

func TestMembersReturnsCopy(t *testing.T) {
	r := mustNew(t, DefaultConfig(), []string{"a", "b"})
	m := r.Members()
	m[0] = "zzz"
	if got := r.Members(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Members() = %q after caller modified a copy", got)
	}
}

func TestSingleMemberOwnsEverything(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, cfg := range testConfigs {
		r := mustNew(t, cfg, []string{"only"})
		for range 1000 {
			if got, ok := r.Owner(rng.Uint64()); got != "only" || !ok {
				t.Fatalf("%+v: Owner = %q, %v, want \"only\", true", cfg, got, ok)
			}
		}
	}
}

// TestOwnerIsMember checks that every partition, and every random key, has
// an owner that is one of the members.
func TestOwnerIsMember(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	keys := randomKeys(rng, 2000)
	for _, cfg := range testConfigs {
		for _, n := range testMemberCounts {
			t.Run(fmt.Sprintf("P%d_R%d_L%v/%d", cfg.PartitionCount, cfg.ReplicationFactor, cfg.Load, n), func(t *testing.T) {
				members := randomNames(rng, n)
				r := mustNew(t, cfg, members)
				isMember := make(map[string]bool)
				for _, m := range members {
					isMember[m] = true
				}
				for p := range cfg.PartitionCount {
					got, ok := r.Owner(uint64(p))
					if !ok || !isMember[got] {
						t.Fatalf("Owner(partition %d) = %q, %v, want a member", p, got, ok)
					}
				}
				for _, k := range keys {
					got, ok := r.Locate(k)
					if !ok || !isMember[got] {
						t.Fatalf("Locate(%x) = %q, %v, want a member", k, got, ok)
					}
					if again, _ := r.Locate(k); again != got {
						t.Fatalf("Locate(%x) = %q then %q", k, got, again)
					}
				}
			})
		}
	}
}

// testHasher is xxhash as consistent sees it, written independently of the
// package's own adapter.
type testHasher struct{}

func (testHasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

type testMember string

func (m testMember) String() string { return string(m) }

// TestMatchesConsistent checks that Owner(xxhash(key)) is what consistent's
// LocateKey returns for the same members and Config, and that the partition
// is keyHash % PartitionCount, as consistent's FindPartitionID computes it.
func TestMatchesConsistent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	keys := randomKeys(rng, 5000)
	for _, cfg := range testConfigs {
		for _, n := range testMemberCounts {
			t.Run(fmt.Sprintf("P%d_R%d_L%v/%d", cfg.PartitionCount, cfg.ReplicationFactor, cfg.Load, n), func(t *testing.T) {
				members := randomNames(rng, n)
				r := mustNew(t, cfg, members)
				// consistent gets the members in a random order: our
				// sorting must not change the answer.
				cms := make([]consistent.Member, n)
				for i, j := range rng.Perm(n) {
					cms[i] = testMember(members[j])
				}
				c := consistent.New(cms, consistent.Config{
					Hasher:            testHasher{},
					PartitionCount:    cfg.PartitionCount,
					ReplicationFactor: cfg.ReplicationFactor,
					Load:              cfg.Load,
				})
				for _, k := range keys {
					h := xxhash.Sum64(k)
					if got, want := c.FindPartitionID(k), int(h%uint64(cfg.PartitionCount)); got != want {
						t.Fatalf("FindPartitionID(%x) = %d, want xxhash %% P = %d", k, got, want)
					}
					want := c.LocateKey(k).String()
					if got, ok := r.Locate(k); got != want || !ok {
						t.Fatalf("Locate(%x) = %q, %v, want consistent's %q", k, got, ok, want)
					}
					if got, _ := r.Owner(h); got != want {
						t.Fatalf("Owner(%#x) = %q, want consistent's %q", h, got, want)
					}
				}
			})
		}
	}
}

// TestOrderInsensitive checks that nodes that learn the same membership in
// different orders, with duplicates, agree on every partition.
func TestOrderInsensitive(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, cfg := range testConfigs {
		for _, n := range testMemberCounts {
			members := randomNames(rng, n)
			ref := mustNew(t, cfg, members).snap.Load().owners
			for trial := range 10 {
				shuffled := slices.Clone(members)
				rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				shuffled = append(shuffled, shuffled[:trial%(n+1)]...) // some duplicates
				got := mustNew(t, cfg, shuffled).snap.Load().owners
				if !slices.Equal(got, ref) {
					t.Fatalf("%+v, %d members, trial %d: ownership differs for order %q", cfg, n, trial, shuffled)
				}
			}
		}
	}
}

// TestBalance checks consistent's bound: no member owns more than
// ceil(Load × PartitionCount / members) partitions.
func TestBalance(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, cfg := range testConfigs {
		for _, n := range testMemberCounts {
			for range 5 {
				members := randomNames(rng, n)
				r := mustNew(t, cfg, members)
				load := make(map[string]int)
				for p := range cfg.PartitionCount {
					o, _ := r.Owner(uint64(p))
					load[o]++
				}
				limit := int(math.Ceil(cfg.Load * float64(cfg.PartitionCount) / float64(n)))
				for m, l := range load {
					if l > limit {
						t.Errorf("%+v, %d members: %s owns %d partitions, bound is %d", cfg, n, m, l, limit)
					}
				}
			}
		}
	}
}

// TestBalanceKeys logs how keys, not partitions, spread under the default
// Config and checks that no member's share exceeds Load/N plus sampling
// noise.
func TestBalanceKeys(t *testing.T) {
	const numKeys = 100_000
	rng := rand.New(rand.NewPCG(6, 6))
	keys := randomKeys(rng, numKeys)
	cfg := DefaultConfig()
	for _, n := range []int{3, 10, 64} {
		r := mustNew(t, cfg, names(n))
		count := make(map[string]int)
		for _, k := range keys {
			o, _ := r.Locate(k)
			count[o]++
		}
		maxShare := 0.0
		for _, c := range count {
			maxShare = max(maxShare, float64(c)/numKeys)
		}
		avg := 1 / float64(n)
		t.Logf("%d members: largest share of keys %.2f%% (average %.2f%%, %.2f× average)", n, 100*maxShare, 100*avg, maxShare/avg)
		// Partition bound plus 4 standard deviations of sampling noise.
		bound := math.Ceil(cfg.Load*float64(cfg.PartitionCount)/float64(n))/float64(cfg.PartitionCount) +
			4*math.Sqrt(avg/numKeys)
		if maxShare > bound {
			t.Errorf("%d members: a member owns %.4f of keys, bound %.4f", n, maxShare, bound)
		}
	}
}

// TestAssignFallback drives assign into consistent's panic with a Config
// that Validate would reject, and checks that it falls back to a balanced,
// deterministic round-robin rather than crashing.
func TestAssignFallback(t *testing.T) {
	bad := Config{PartitionCount: 100, ReplicationFactor: 20, Load: 0.5}
	members := []string{"a", "b", "c"}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatalf("consistent.New did not panic with Load 0.5; the fallback test no longer exercises the fallback")
			}
		}()
		cms := []consistent.Member{testMember("a"), testMember("b"), testMember("c")}
		consistent.New(cms, consistent.Config{Hasher: testHasher{}, PartitionCount: 100, ReplicationFactor: 20, Load: 0.5})
	}()
	got := assign(members, bad)
	if len(got) != 100 {
		t.Fatalf("len(assign) = %d, want 100", len(got))
	}
	for p, o := range got {
		if want := members[p%3]; o != want {
			t.Fatalf("partition %d: owner %q, want %q", p, o, want)
		}
	}
}

func TestOwnerDoesNotAllocate(t *testing.T) {
	r := mustNew(t, DefaultConfig(), names(10))
	key := []byte("tenant-42|/v1/orgs/{orgId}/product/*|GET|1700000000|1700000010")
	var sink string
	if a := testing.AllocsPerRun(1000, func() { sink, _ = r.Owner(12345) }); a != 0 {
		t.Errorf("Owner allocates %v times per call, want 0", a)
	}
	if a := testing.AllocsPerRun(1000, func() { sink, _ = r.Locate(key) }); a != 0 {
		t.Errorf("Locate allocates %v times per call, want 0", a)
	}
	_ = sink
}

// TestConcurrentSetAndOwner rebuilds the ring while readers look keys up;
// run it with -race. Readers must always get an owner from one of the sets,
// and Version must never go backwards.
func TestConcurrentSetAndOwner(t *testing.T) {
	sets := [][]string{names(3), names(4), names(10), names(11), {"x", "y"}}
	allowed := make(map[string]bool)
	for _, s := range sets {
		for _, m := range s {
			allowed[m] = true
		}
	}
	r := mustNew(t, DefaultConfig(), sets[0])

	const rebuilds = 200
	const readers = 3
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			var lastVersion uint64
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				v := r.Version()
				if v < lastVersion {
					errs <- fmt.Errorf("Version went from %d to %d", lastVersion, v)
					return
				}
				lastVersion = v
				o, ok := r.Owner(rng.Uint64())
				if !ok || !allowed[o] {
					errs <- fmt.Errorf("Owner = %q, %v during rebuilds", o, ok)
					return
				}
				if ms := r.Members(); len(ms) < 2 {
					errs <- fmt.Errorf("Members() = %q during rebuilds", ms)
					return
				}
			}
		}()
	}
	var setters sync.WaitGroup
	for s := range 2 {
		setters.Add(1)
		go func() {
			defer setters.Done()
			for i := range rebuilds / 2 {
				r.Set(sets[(i+s)%len(sets)])
			}
		}()
	}
	setters.Wait()
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if v := r.Version(); v == 0 || v > rebuilds+1 { // New set the first member list
		t.Errorf("Version() = %d after %d Set calls, want 1..%d", v, rebuilds, rebuilds+1)
	}
}

// TestOwnerFuncKeepsItsBuild: an OwnerFunc answers as Owner did when it was
// taken, after the ring has been set to other members.
func TestOwnerFuncKeepsItsBuild(t *testing.T) {
	r := mustNew(t, DefaultConfig(), names(3))
	before := r.OwnerFunc()
	rng := rand.New(rand.NewPCG(2, 2))
	hashes := make([]uint64, 1000)
	want := make([]string, len(hashes))
	for i := range hashes {
		hashes[i] = rng.Uint64()
		want[i], _ = r.Owner(hashes[i])
	}
	r.Set(names(5))
	moved := 0
	for i, h := range hashes {
		if got, ok := before(h); got != want[i] || !ok {
			t.Fatalf("hash %d: OwnerFunc = %q, %v after Set, want %q", h, got, ok, want[i])
		}
		if now, _ := r.Owner(h); now != want[i] {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no key moved to the new members: the test shows nothing")
	}
	empty, _ := New(DefaultConfig())
	if got, ok := empty.OwnerFunc()(1); got != "" || ok {
		t.Fatalf("empty ring: OwnerFunc = %q, %v", got, ok)
	}
}
