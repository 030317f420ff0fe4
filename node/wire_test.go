package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/peerpb"
	"google.golang.org/protobuf/proto"
)

// globals returns the global totals of an answer, packed or not.
func globals(t testing.TB, resp *peerpb.SyncResponse) []int64 {
	t.Helper()
	var out []int64
	for _, tot := range resp.Totals {
		out = append(out, tot.Global)
	}
	r := reader{b: resp.Packed}
	var a counters.Answer
	for len(r.b) > 0 && !r.bad {
		readTotal(&r, 0, &a)
		out = append(out, a.Global)
	}
	if r.bad {
		t.Fatalf("malformed packed answer")
	}
	return out
}

// fault says what happens to one call in wireCluster.sync.
type fault int

const (
	deliver    fault = iota
	dropReq          // the request never arrives
	dropAnswer       // the request is handled, the answer lost
)

// wireCluster drives a cluster's engines through the wire encoding (each
// request and answer marshalled and unmarshalled), counting what every
// member admitted per tenant.
type wireCluster struct {
	*cluster
	t       *testing.T
	tenants int
	truth   []int64 // admitted per tenant, over every member and run
	held    []heldCall
}

// resyncs sums the members' Resyncs.
func (w *wireCluster) resyncs() (n uint64) {
	for _, e := range w.engines {
		n += e.Resyncs()
	}
	return n
}

// heldCall is a request kept to be delivered again later (a duplicate).
type heldCall struct {
	from, to string
	raw      []byte
}

func newWireCluster(t *testing.T, names []string, tenants int) *wireCluster {
	return newWireClusterPolicy(t, names, tenants, PolicyOptimistic)
}

func newWireClusterPolicy(t *testing.T, names []string, tenants int, p Policy) *wireCluster {
	c := &cluster{t: t, engines: map[string]*Engine{}, cut: map[[2]string]bool{}}
	for _, n := range names {
		e, err := NewEngine(EngineConfig{Name: n, Incarnation: 1, Policy: p, Table: counters.DefaultConfig(), Ring: ringDefault()})
		if err != nil {
			t.Fatal(err)
		}
		c.engines[n] = e
		c.names = append(c.names, n)
	}
	c.setMembers(t0, names...)
	return &wireCluster{cluster: c, t: t, tenants: tenants, truth: make([]int64, tenants)}
}

func wireLimit(tenant int) []counters.Limit {
	return []counters.Limit{{Tenant: fmt.Sprintf("tenant-%d", tenant), Endpoint: "/v1/p/*", Method: "GET", Period: 10 * time.Second, Threshold: 1 << 40}}
}

// load has every member admit requests of random tenants (and of every
// tenant once, so that every member holds every series).
func (w *wireCluster) load(now time.Time, rng *rand.Rand, n int) {
	for _, name := range w.names {
		e := w.engines[name]
		for i := 0; i < w.tenants+n; i++ {
			tn := i
			if i >= w.tenants {
				tn = rng.IntN(w.tenants)
			}
			d, err := e.Take(now, wireLimit(tn), 1)
			if err != nil {
				w.t.Fatal(err)
			}
			if d.Allowed {
				w.truth[tn]++
			}
		}
	}
}

// sync runs one interval on every member; fail says what happens to each
// call (nil: all delivered).
func (w *wireCluster) sync(now time.Time, fail func(from, to string) fault) {
	w.t.Helper()
	for _, name := range w.names {
		e := w.engines[name]
		for _, b := range e.Prepare(now) {
			f := deliver
			if fail != nil {
				f = fail(name, b.Owner)
			}
			raw, err := proto.Marshal(b.Req)
			if err != nil {
				w.t.Fatal(err)
			}
			if f == dropReq {
				e.Fail(now, b)
				continue
			}
			w.held = append(w.held, heldCall{from: name, to: b.Owner, raw: raw})
			resp := w.call(now, b.Owner, raw)
			if f == dropAnswer {
				e.Fail(now, b)
				continue
			}
			if err := e.Apply(now, b, resp); err != nil {
				w.t.Fatalf("%s -> %s: %v", name, b.Owner, err)
			}
		}
	}
}

// call delivers raw to member to and returns the answer, as received.
func (w *wireCluster) call(now time.Time, to string, raw []byte) *peerpb.SyncResponse {
	w.t.Helper()
	var req peerpb.SyncRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		w.t.Fatal(err)
	}
	resp, err := w.engines[to].Handle(now, &req)
	if err != nil {
		w.t.Fatalf("%s -> %s: %v", req.Origin, to, err)
	}
	out, err := proto.Marshal(resp)
	if err != nil {
		w.t.Fatal(err)
	}
	var back peerpb.SyncResponse
	if err := proto.Unmarshal(out, &back); err != nil {
		w.t.Fatal(err)
	}
	return &back
}

// check runs two clean intervals and then wants every member's cached
// global of every tenant to be exactly what the cluster admitted: no count
// lost, none doubled.
func (w *wireCluster) check(step string, now time.Time) {
	w.t.Helper()
	w.sync(now, nil)
	w.sync(now, nil)
	bad := 0
	for _, name := range w.names {
		e := w.engines[name]
		for tn := range w.tenants {
			l := wireLimit(tn)[0]
			en := e.Table().Get(l.Tenant, l.Endpoint, l.Method, l.Period)
			if en == nil {
				w.t.Fatalf("%s: %s holds no %s", step, name, l.Tenant)
			}
			en.Lock()
			g := en.Current().Global
			en.Unlock()
			if g != w.truth[tn] && bad < 5 {
				bad++
				w.t.Errorf("%s: %s sees %s global %d, want %d", step, name, l.Tenant, g, w.truth[tn])
			}
		}
	}
}

// dictBytes returns the definition bytes of one more interval's batches.
func (w *wireCluster) dictBytes(now time.Time) (n int) {
	for _, name := range w.names {
		e := w.engines[name]
		for _, b := range e.Prepare(now) {
			n += len(b.Req.Dict)
			raw, _ := proto.Marshal(b.Req)
			if err := e.Apply(now, b, w.call(now, b.Owner, raw)); err != nil {
				w.t.Fatal(err)
			}
		}
	}
	return n
}

// TestWireResynchronises runs the packed encoding through the events that
// put a sender's and a receiver's dictionaries out of step, on real
// engines, and wants the totals exact after each: a new peer, a restarted
// peer (a new incarnation: its dictionaries and its owner state are gone),
// a peer that lost its dictionary, a lost request or answer carrying new
// definitions, and a batch delivered again late.
func TestWireResynchronises(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	w := newWireCluster(t, []string{"a", "b"}, 200)
	now := t0.Add(time.Second)
	w.load(now, rng, 500)
	w.check("two members", now)
	if n := w.dictBytes(now); n != 0 {
		t.Errorf("steady state: %d bytes of definitions, want 0", n)
	}

	// A new peer joins: the keys it now owns are defined to it afresh.
	e, err := NewEngine(EngineConfig{Name: "c", Incarnation: 1, Policy: PolicyOptimistic, Table: counters.DefaultConfig(), Ring: ringDefault()})
	if err != nil {
		t.Fatal(err)
	}
	w.engines["c"] = e
	w.names = append(w.names, "c")
	now = now.Add(200 * time.Millisecond)
	w.setMembers(now, w.names...)
	w.load(now, rng, 500)
	w.check("a new peer", now)
	if n := w.dictBytes(now); n != 0 {
		t.Errorf("steady state after the join: %d bytes of definitions, want 0", n)
	}

	// A peer restarts (a new incarnation): the others' dictionaries for it
	// are refused once (resync), its own start anew. Its owner state is
	// gone too; the others' knowledge of the old totals restores them.
	resyncs := w.resyncs()
	e, err = NewEngine(EngineConfig{Name: "b", Incarnation: 2, Policy: PolicyOptimistic, Table: counters.DefaultConfig(), Ring: ringDefault()})
	if err != nil {
		t.Fatal(err)
	}
	w.engines["b"] = e
	now = now.Add(200 * time.Millisecond)
	w.setMembers(now, w.names...)
	w.load(now, rng, 500)
	w.sync(now, nil) // the refused batches' counts go again at the next interval
	w.check("a restarted peer", now)
	if w.resyncs() == resyncs {
		t.Errorf("a restarted peer: no batch was refused for resync")
	}

	// A peer loses its dictionary of another (as a restart of its
	// receiving side would).
	resyncs = w.resyncs()
	w.engines["c"].recvMu.Lock()
	delete(w.engines["c"].recv, "a")
	w.engines["c"].recvMu.Unlock()
	now = now.Add(200 * time.Millisecond)
	w.load(now, rng, 500)
	w.sync(now, nil)
	w.check("a lost dictionary", now)
	if w.resyncs() != resyncs+1 {
		t.Errorf("a lost dictionary: %d resyncs, want 1", w.resyncs()-resyncs)
	}

	// New series whose definitions are lost with the request, then with the
	// answer: they go again until acknowledged.
	for _, f := range []fault{dropReq, dropAnswer} {
		w.tenants += 50
		w.truth = append(w.truth, make([]int64, 50)...)
		now = now.Add(200 * time.Millisecond)
		w.load(now, rng, 500)
		w.sync(now, func(from, to string) fault { return f })
		w.load(now, rng, 500)
		w.check(fmt.Sprintf("fault %d", f), now)
		for _, from := range w.names {
			for to, d := range w.engines[from].dicts {
				r := w.engines[to].recv[from]
				if r == nil || r.session != d.session || len(r.keys) != len(d.ents) || d.confirmed != len(d.ents) {
					t.Errorf("fault %d: %s -> %s: dictionaries out of step", f, from, to)
				}
			}
		}
	}

	// Every request of the run delivered again, late and out of order: a
	// G-counter keeps the largest count per origin, so nothing changes.
	now = now.Add(200 * time.Millisecond)
	for i := len(w.held) - 1; i >= 0; i-- {
		h := w.held[i]
		if w.engines[h.to] == nil || w.engines[h.from] == nil {
			continue
		}
		w.call(now, h.to, h.raw)
	}
	w.check("late duplicates", now)
}

// TestWireRefusedBatchChangesNothing: a packed batch that fails validation
// (here a report whose counts are out of range) leaves the owner's windows
// and the dictionary as they were.
func TestWireRefusedBatchChangesNothing(t *testing.T) {
	w := newWireCluster(t, []string{"a", "b"}, 20)
	now := t0.Add(time.Second)
	w.load(now, rand.New(rand.NewPCG(3, 4)), 0)
	w.sync(now, nil) // the first batch to a member is unpacked: it says it decodes the packed form
	b := w.engines["b"]
	windows := b.Owner().Stats().Windows
	b.recvMu.Lock()
	clear(b.recv)
	b.recvMu.Unlock()
	bs := w.engines["a"].Prepare(now)
	if len(bs) != 1 || bs[0].Req.PackedCount == 0 {
		t.Fatalf("want one packed batch, got %d", len(bs))
	}
	req := proto.Clone(bs[0].Req).(*peerpb.SyncRequest)
	req.Packed = append(append([]byte(nil), req.Packed...), 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f)
	req.PackedCount++
	if _, err := b.Handle(now, req); !errors.Is(err, ErrBadBatch) {
		t.Fatalf("bad batch: err = %v, want ErrBadBatch", err)
	}
	if n := b.Owner().Stats().Windows; n != windows {
		t.Errorf("refused batch changed the windows: %d, were %d", n, windows)
	}
	if d := b.recv["a"]; d != nil && (d.session != 0 || len(d.keys) != 0) {
		t.Errorf("refused batch left a dictionary")
	}
	resp, err := b.Handle(now, bs[0].Req)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.engines["a"].Apply(now, bs[0], resp); err != nil {
		t.Fatal(err)
	}
}

// TestWirePackedOnlyToMembersThatSayTheyDecodeIt: the first batch to a
// member is unpacked; once its answer says it decodes the packed form the
// next ones are packed; an answer from a member that does not (an older
// version, which ignores the packed fields and answers no totals) fails
// that batch and turns the next ones back to the unpacked form, so members
// of different versions keep syncing through an upgrade or a downgrade.
func TestWirePackedOnlyToMembersThatSayTheyDecodeIt(t *testing.T) {
	w := newWireCluster(t, []string{"a", "b"}, 20)
	a := w.engines["a"]
	rng := rand.New(rand.NewPCG(5, 6))
	now := t0.Add(time.Second)
	form := func(step string, packed bool) *Batch {
		t.Helper()
		w.load(now, rng, 20)
		bs := a.Prepare(now)
		if len(bs) != 1 {
			t.Fatalf("%s: %d batches, want 1", step, len(bs))
		}
		if got := bs[0].Req.PackedCount > 0; got != packed || (len(bs[0].Req.Reports) > 0) == packed {
			t.Fatalf("%s: packed %v (%d packed, %d unpacked reports), want packed %v", step, got, bs[0].Req.PackedCount, len(bs[0].Req.Reports), packed)
		}
		return bs[0]
	}
	deliver := func(b *Batch) {
		t.Helper()
		raw, _ := proto.Marshal(b.Req)
		if err := a.Apply(now, b, w.call(now, b.Owner, raw)); err != nil {
			t.Fatal(err)
		}
	}
	deliver(form("first batch", false))
	deliver(form("after an answer that decodes it", true))
	old := form("to a member about to be downgraded", true)
	// The old version's answer: the packed fields unknown, no totals.
	if err := a.Apply(now, old, &peerpb.SyncResponse{Incarnation: 1, Seq: 9}); err == nil {
		t.Fatal("an answer with no totals for a packed batch was applied")
	}
	deliver(form("after an answer that does not decode it", false))
	w.check("through the change of forms", now)
}

// TestReaderMatchesUvarint: the reader's varints (a byte, eight bytes at
// once, or binary.Uvarint near the end of its input) read what
// binary.Uvarint reads, for every length and at every distance from the
// end, and a malformed one (too long, or cut short) sets bad.
func TestReaderMatchesUvarint(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var vals []uint64
	for bitsN := range 65 {
		for range 20 {
			v := rnd.Uint64()
			if bitsN < 64 {
				v &= 1<<bitsN - 1
			}
			vals = append(vals, v)
		}
	}
	vals = append(vals, 0, 127, 128, 1<<56-1, 1<<56, math.MaxUint64)
	for _, v := range vals {
		enc := binary.AppendUvarint(nil, v)
		for pad := range 10 { // bytes after the varint
			in := append(slices.Clone(enc), make([]byte, pad)...)
			r := reader{b: in}
			if got := r.u(); got != v || r.bad || len(r.b) != pad {
				t.Fatalf("%x (pad %d): got %d, bad %v, %d bytes left; want %d", enc, pad, got, r.bad, len(r.b), v)
			}
		}
	}
	// A non-minimal varint reads as binary.Uvarint reads it.
	r := reader{b: []byte{0x81, 0x80, 0x80, 0x00, 0, 0, 0, 0, 0}}
	if got := r.u(); got != 1 || r.bad || len(r.b) != 5 {
		t.Fatalf("non-minimal: got %d, bad %v, %d left", got, r.bad, len(r.b))
	}
	for _, in := range [][]byte{
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, // 11 bytes
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},       // past 64 bits
		{0x80, 0x80, 0x80}, // cut short
		{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}, // cut short, 9 bytes
	} {
		r := reader{b: in}
		if r.u(); !r.bad {
			t.Errorf("%x: not refused", in)
		}
	}
}

// readHeads reads the n heads of b through checkHeads (nil: none).
func readHeads(b []byte, n int) ([]int64, error) {
	r, err := checkHeads(b, n)
	if err != nil || len(r.b) == 0 {
		return nil, err
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(r.u())
	}
	return out, nil
}

// TestCheckHeads: heads are all there or none, each an unsigned varint of
// at most MaxCount, nothing after them, and read back as they were sent.
func TestCheckHeads(t *testing.T) {
	enc := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.AppendUvarint(b, v)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		n    int
		want []int64
		ok   bool
	}{
		{"none", nil, 3, nil, true},
		{"all", enc(0, 7, 300), 3, []int64{0, 7, 300}, true},
		{"too few", enc(1, 2), 3, nil, false},
		{"bytes after", enc(1, 2, 3, 4), 3, nil, false},
		{"beyond MaxCount", enc(0, uint64(MaxCount)+1, 0), 3, nil, false},
		{"truncated", []byte{0x80}, 1, nil, false},
		{"for no reports", enc(0), 0, nil, false},
		{"far too long", make([]byte, 100), 2, nil, false},
	} {
		got, err := readHeads(tc.b, tc.n)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v, ok %v", tc.name, got, err, tc.want, tc.ok)
		}
	}
}

// TestWireCarriesHeads runs the lease policy's packed batches through the
// wire: an owner that admits its own share of a tenant answers the others
// its head (counters.Answer.Head), they keep it with the total and hand it
// back in their next batch (SyncRequest.known_heads), and an owner refuses
// a batch whose heads are malformed, counting nothing.
func TestWireCarriesHeads(t *testing.T) {
	w, l, now := newHeadCluster(t, 10_000)
	en := w.engines["a"].Table().Get(l[0].Tenant, l[0].Endpoint, l[0].Method, l[0].Period)
	owner, _ := w.engines["a"].Ring().Owner(en.Hash())
	m := "a"
	if owner == "a" {
		m = "b"
	}
	en = w.engines[m].Table().Get(l[0].Tenant, l[0].Endpoint, l[0].Method, l[0].Period)
	en.Lock()
	head, own := en.Current().Head, en.Current().Own
	en.Unlock()
	if head <= 0 || own == 0 {
		t.Fatalf("%s, after six intervals of traffic everywhere: head %d, own %d; want the owner %s's head above 0", m, head, own, owner)
	}
	w.engines[m].Take(now, l, 1) // something to report
	var req *peerpb.SyncRequest
	for _, b := range w.engines[m].Prepare(now) {
		if b.Owner == owner {
			req = b.Req
		}
		w.engines[m].Fail(now, b)
	}
	if req == nil || req.PackedCount == 0 {
		t.Fatalf("%s's next batches hold no packed report for %s", m, owner)
	}
	heads, err := readHeads(req.KnownHeads, int(req.PackedCount))
	if err != nil || !slices.Contains(heads, int64(head)) {
		t.Fatalf("%s's batch to %s: known heads %v (%v), want %d among them", m, owner, heads, err, head)
	}
	// A refused batch counts nothing: the owner numbers the answers to a
	// member (Owner.Hello) only for batches it takes, so the next good
	// one's answer comes right after the last.
	handle := func(r *peerpb.SyncRequest) (*peerpb.SyncResponse, error) {
		return w.engines[owner].Handle(now, proto.Clone(r).(*peerpb.SyncRequest))
	}
	first, err := handle(req)
	if err != nil {
		t.Fatal(err)
	}
	bad := proto.Clone(req).(*peerpb.SyncRequest)
	bad.KnownHeads = append(bad.KnownHeads, 0)
	if _, err := handle(bad); !errors.Is(err, ErrBadBatch) {
		t.Fatalf("a batch with a head too many: %v, want ErrBadBatch", err)
	}
	next, err := handle(req)
	if err != nil {
		t.Fatal(err)
	}
	if next.Seq != first.Seq+1 {
		t.Errorf("answers numbered %d, then %d after the refused batch: it was taken", first.Seq, next.Seq)
	}
}

// newHeadCluster returns three lease members that each took 20 requests
// of one tenant in each of six sync intervals, the tenant's limits (with
// the given threshold) and the time after the last interval: the
// tenant's owner has granted itself a cap, and answers the others its
// head.
func newHeadCluster(t *testing.T, threshold int64) (*wireCluster, []counters.Limit, time.Time) {
	t.Helper()
	w := newWireClusterPolicy(t, []string{"a", "b", "c"}, 1, PolicyLease)
	l := wireLimit(0)
	l[0].Threshold = threshold
	now := t0
	for range 6 {
		for _, name := range w.names {
			for range 20 {
				if _, err := w.engines[name].Take(now, l, 1); err != nil {
					t.Fatal(err)
				}
			}
		}
		w.sync(now, nil)
		now = now.Add(200 * time.Millisecond)
	}
	return w, l, now
}

// ownerAndMember returns the owner of l's series, in a's view of the
// ring, and another member.
func (w *wireCluster) ownerAndMember(now time.Time, l []counters.Limit) (owner, m string) {
	w.t.Helper()
	w.engines["a"].Take(now, l, 0)
	en := w.engines["a"].Table().Get(l[0].Tenant, l[0].Endpoint, l[0].Method, l[0].Period)
	owner, _ = w.engines["a"].Ring().Owner(en.Hash())
	if owner == "a" {
		return owner, "b"
	}
	return owner, "a"
}

// exchange delivers batch b of member from to its owner through the
// marshalled wire, lets edit change the answer as received, and applies
// it.
func (w *wireCluster) exchange(now time.Time, from string, b *Batch, edit func(*peerpb.SyncResponse)) {
	w.t.Helper()
	raw, err := proto.Marshal(b.Req)
	if err != nil {
		w.t.Fatal(err)
	}
	resp := w.call(now, b.Owner, raw)
	edit(resp)
	if err := w.engines[from].Apply(now, b, resp); err != nil {
		w.t.Fatal(err)
	}
}

// TestWireCarriesPrompt: an owner's answer that asks for a prompt report
// (counters.Answer.Prompt) crosses the packed wire, and a member whose cap
// it lowers says so (Engine.Prompted) and reports the window in its next
// sync asked for at once; one whose cap it does not lower does neither.
// Which answers ask for it is the owner's rule (counters.TestOwnerPrompt).
func TestWireCarriesPrompt(t *testing.T) {
	var a counters.Answer
	for _, p := range []bool{false, true} {
		b := appendTotal(nil, 5, counters.Answer{Global: 9, Grant: 7, HasGrant: true, Carry: true, Spare: 3, Prompt: p})
		r := reader{b: b}
		readTotal(&r, 5, &a)
		if r.bad || len(r.b) != 0 || a != (counters.Answer{Global: 9, Grant: 7, HasGrant: true, Carry: true, Spare: 3, Prompt: p}) {
			t.Fatalf("prompt %v: read back %+v", p, a)
		}
	}

	w := newWireClusterPolicy(t, []string{"a", "b", "c"}, 1, PolicyLease)
	l := wireLimit(0)
	l[0].Threshold = 100
	owner, m := w.ownerAndMember(t0, l)
	now := t0.Add(100 * time.Millisecond)
	for range 5 {
		for range 5 {
			w.engines[m].Take(now, l, 1)
		}
		w.sync(now, nil)
		now = now.Add(200 * time.Millisecond)
	}
	// m's report without demand, answered as an owner asking for a prompt
	// report would: with every total's prompt bit set.
	report := func(grant func(own, g int64) int64) bool {
		t.Helper()
		for _, b := range w.engines[m].Prepare(now) {
			w.exchange(now, m, b, func(resp *peerpb.SyncResponse) {
				r := reader{b: resp.Packed}
				var out []byte
				for i := range b.refs {
					readTotal(&r, b.refs[i].own, &a)
					a.Prompt, a.Grant = true, grant(b.refs[i].own, a.Grant)
					out = appendTotal(out, b.refs[i].own, a)
				}
				resp.Packed = append(out, r.b...)
			})
		}
		return w.engines[m].Prompted()
	}
	en := w.engines[m].Table().Get(l[0].Tenant, l[0].Endpoint, l[0].Method, l[0].Period)
	en.Lock()
	held := en.Current().Granted
	en.Unlock()
	if report(func(_, g int64) int64 { return max(g, held) }) {
		t.Fatalf("%s: Prompted after an answer that kept its cap %d", m, held)
	}
	now = now.Add(200 * time.Millisecond)
	if !report(func(own, _ int64) int64 { return own }) {
		t.Fatalf("%s: not Prompted after an answer that lowered its cap from %d and asked for it", m, held)
	}
	if w.engines[m].Prompted() {
		t.Fatalf("%s: Prompted twice for one answer", m)
	}
	asking := w.engines[m].PrepareAsking(now)
	if len(asking) != 1 || asking[0].Owner != owner || asking[0].Len() != 1 {
		t.Fatalf("%s's prompt sync: %d batches, want one report to %s", m, len(asking), owner)
	}
	for _, b := range asking {
		w.engines[m].Fail(now, b)
	}
}

// TestWireCarriesPromptUnpacked: the unpacked answer (to a member's first
// batch to an owner, or from an owner of an earlier version) carries the
// prompt too (Total.prompt), and a member whose cap it lowers says so.
func TestWireCarriesPromptUnpacked(t *testing.T) {
	w := newWireClusterPolicy(t, []string{"a", "b", "c"}, 1, PolicyLease)
	l := wireLimit(0)
	l[0].Threshold = 100
	now := t0.Add(100 * time.Millisecond)
	owner, m := w.ownerAndMember(now, l)
	w.engines[m].Take(now, l, 0)
	en := w.engines[m].Table().Get(l[0].Tenant, l[0].Endpoint, l[0].Method, l[0].Period)
	en.Lock()
	s := en.Current()
	s.Own, s.Granted, s.HasGrant = 5, 50, true // a cap it holds, as if granted before
	en.Unlock()
	for _, prompt := range []bool{false, true} {
		var sent bool
		for _, b := range w.engines[m].Prepare(now) {
			if b.Owner != owner {
				w.engines[m].Fail(now, b)
				continue
			}
			if b.Req.PackedCount != 0 || len(b.Req.Reports) == 0 {
				t.Fatalf("%s's batch to %s: %d packed, %d unpacked reports; want it unpacked", m, owner, b.Req.PackedCount, len(b.Req.Reports))
			}
			w.exchange(now, m, b, func(resp *peerpb.SyncResponse) {
				resp.PackedOk = false // stay unpacked
				for _, tot := range resp.Totals {
					tot.HasGrant, tot.Grant, tot.Prompt = true, 10, prompt
				}
			})
			sent = true
		}
		if !sent {
			t.Fatalf("%s sent %s no batch", m, owner)
		}
		if got := w.engines[m].Prompted(); got != prompt {
			t.Fatalf("answer lowering the cap from 50 to 10, prompt %v: Prompted %v", prompt, got)
		}
		en.Lock()
		en.Current().Granted = 50
		en.Unlock()
		now = now.Add(200 * time.Millisecond)
	}
}

// TestWireRestartedOwnerHoldsBackItsHead: the owner of a tenant's series
// restarts within a window (a new incarnation, no state). A member's next
// batch hands back, with the total the earlier run answered it, that
// run's head (known_heads): what the run may still have admitted itself
// beyond the total. The new run, which hears of its earlier run from a
// peer's answer (PreviousRunMs), holds that much back: it grants the
// member less than it grants the same batches without heads (the member's
// part of the head: the two members with demand share what is left). An
// owner that ignored known_heads would grant the two alike.
func TestWireRestartedOwnerHoldsBackItsHead(t *testing.T) {
	grant := func(heads bool) (granted, head int64) {
		w, l, now := newHeadCluster(t, 420)
		owner, m := w.ownerAndMember(now, l)
		en := w.engines[m].Table().Get(l[0].Tenant, l[0].Endpoint, l[0].Method, l[0].Period)
		en.Lock()
		head = int64(en.Current().Head)
		en.Unlock()

		// The owner restarts, and learns from a peer's answer that an
		// earlier run of it was alive.
		e, err := NewEngine(EngineConfig{Name: owner, Incarnation: 2, Policy: PolicyLease, Table: counters.DefaultConfig(), Ring: ringDefault()})
		if err != nil {
			t.Fatal(err)
		}
		w.engines[owner] = e
		e.SetMembers(now, w.names)
		for _, b := range e.Prepare(now) {
			raw, err := proto.Marshal(b.Req)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Apply(now, b, w.call(now, b.Owner, raw)); err != nil {
				t.Fatal(err)
			}
		}

		// Both other members report, m last: a member not heard from yet
		// is reserved more than the head anyway. Their first batches to
		// the new run are refused for resync (it knows none of their
		// definitions), and go again.
		var order []string
		for _, name := range w.names {
			if name != owner && name != m {
				order = append(order, name)
			}
		}
		order = append(order, m)
		for _, name := range append(order, order...) {
			w.engines[name].Take(now, l, 1) // something to report
			for _, b := range w.engines[name].Prepare(now) {
				if b.Owner != owner {
					w.engines[name].Fail(now, b)
					continue
				}
				if !heads {
					b.Req.KnownHeads = nil
				}
				raw, err := proto.Marshal(b.Req)
				if err != nil {
					t.Fatal(err)
				}
				if err := w.engines[name].Apply(now, b, w.call(now, owner, raw)); err != nil {
					t.Fatal(err)
				}
			}
		}
		en.Lock()
		defer en.Unlock()
		if !en.Current().HasGrant {
			t.Fatalf("%s holds no grant of the restarted %s", m, owner)
		}
		return en.Current().Granted, head
	}
	with, head := grant(true)
	without, _ := grant(false)
	if head <= 0 {
		t.Fatalf("the earlier run's head %d, want above 0", head)
	}
	// The head comes off what the two members with demand share.
	if d := without - with; d <= 0 || d > head {
		t.Errorf("the restarted owner granted %d with the earlier run's head of %d, %d without: want up to %d less, and less", with, head, without, head)
	}
}
