package node

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/peerpb"
	"google.golang.org/protobuf/proto"
)

// FuzzSyncHandler feeds the bytes of a Sync request, as a peer may send
// them, to the handler: protobuf decoding, then Engine.Handle on a lease
// owner of a 3-member cluster. Nothing may panic; a request the handler
// accepts gets one total per report, and a refused one leaves the owner's
// windows as they were.
func FuzzSyncHandler(f *testing.F) {
	good := &peerpb.SyncRequest{Origin: "n1", Incarnation: 1, Ack: 0, Reports: []*peerpb.Report{{
		Tenant: "t", Endpoint: "/p", Method: "GET", PeriodMs: 10_000, WindowStartMs: t0.UnixMilli(),
		Threshold: 100, Own: 5, Demand: 5, Cap: 30, HasGrant: true, Carry: true, CapFrom: "n0", KnownFrom: "n0",
	}}}
	for _, m := range []proto.Message{good, &peerpb.SyncRequest{Origin: "n2", Leaving: true}, &peerpb.SyncRequest{}} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		var req peerpb.SyncRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			return // refused by the codec, as gRPC would
		}
		e, err := NewEngine(EngineConfig{Name: "n0", Incarnation: 1, Policy: PolicyLease, Table: counters.DefaultConfig(), Ring: ringDefault()})
		if err != nil {
			t.Fatal(err)
		}
		e.SetMembers(t0, []string{"n0", "n1", "n2"})
		before := e.Owner().Stats().Windows
		resp, err := e.Handle(t0.Add(time.Second), &req)
		if err != nil {
			if w := e.Owner().Stats().Windows; w != before {
				t.Fatalf("refused batch (%v) changed the owner: %d windows, were %d", err, w, before)
			}
			return
		}
		if len(resp.Totals) != len(req.Reports) {
			t.Fatalf("%d totals for %d reports", len(resp.Totals), len(req.Reports))
		}
	})
}

// FuzzAuthEnvelope feeds arbitrary tags and request bytes to the
// authentication check: nothing may panic, and nothing verifies but a tag
// made with the key for exactly that request.
func FuzzAuthEnvelope(f *testing.F) {
	key := bytes.Repeat([]byte{1}, 32)
	signer := newPeerAuth(keysOf(key))
	req := &peerpb.SyncRequest{Origin: "n1", Incarnation: 3, Reports: []*peerpb.Report{{Tenant: "t", Own: 1}}}
	v, _, err := signer.signRequest(t0, req)
	if err != nil {
		f.Fatal(err)
	}
	body, _ := proto.Marshal(req)
	f.Add(v, body)
	f.Add("", body)
	f.Add(v[:len(v)-1]+"A", body)
	f.Add("AAAA", []byte{})
	f.Fuzz(func(t *testing.T, tag string, data []byte) {
		var r peerpb.SyncRequest
		if proto.Unmarshal(data, &r) != nil {
			return
		}
		a := newPeerAuth(keysOf(key))
		_, err := a.verifyRequest(t0, &r, tag)
		if err == nil && !(tag == v && proto.Equal(&r, req)) {
			t.Fatalf("tag %q verified for %v", tag, &r)
		}
		if err != nil && !errors.Is(err, errAuthBad) && !errors.Is(err, errAuthMissing) && !errors.Is(err, errAuthStale) {
			t.Fatalf("unexpected error %v", err)
		}
		if err := a.verifyResponse([]byte(tag), &peerpb.SyncResponse{}, tag); err == nil {
			t.Fatalf("answer tag %q verified", tag)
		}
	})
}

// FuzzPackedSync feeds the bytes of a Sync request in the packed form to
// an owner that already holds a dictionary of the sender's (session 1, a
// few series): protobuf decoding, then Engine.Handle. Nothing may panic; a
// refused batch leaves the owner's windows and the dictionary as they
// were; one answered resync leaves the windows, and the dictionary as it
// was or forgotten; an accepted one gets one packed total per report.
func FuzzPackedSync(f *testing.F) {
	setup := func(tb testing.TB) (owner, sender *Engine, first *peerpb.SyncRequest) {
		mk := func(name string) *Engine {
			e, err := NewEngine(EngineConfig{Name: name, Incarnation: 1, Policy: PolicyLease, Table: counters.DefaultConfig(), Ring: ringDefault(), MaxBatch: 64})
			if err != nil {
				tb.Fatal(err)
			}
			e.SetMembers(t0, []string{"n0", "n1"})
			return e
		}
		owner, sender = mk("n0"), mk("n1")
		now := t0.Add(time.Second)
		// Two rounds: the first batch to a member is unpacked, and its
		// answer says the member decodes the packed form.
		for range 2 {
			for i := 0; i < 12; i++ {
				l := []counters.Limit{{Tenant: fmt.Sprintf("t%d", i), Endpoint: "/p", Method: "GET", Period: 10 * time.Second, Threshold: 100, Algorithm: counters.Algorithm(i % 2)}}
				sender.Take(now, l, int64(i+1))
			}
			for _, b := range sender.Prepare(now) {
				if b.Owner != "n0" {
					continue
				}
				resp, err := owner.Handle(now, b.Req)
				if err != nil {
					tb.Fatal(err)
				}
				if err := sender.Apply(now, b, resp); err != nil {
					tb.Fatal(err)
				}
				first = b.Req
			}
		}
		if first == nil || first.PackedCount == 0 {
			tb.Fatal("no packed batch to n0")
		}
		return owner, sender, first
	}
	_, sender, first := setup(f)
	seed := func(m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(first) // its definitions again (base 0)
	now := t0.Add(1200 * time.Millisecond)
	for i := 12; i < 15; i++ {
		sender.Take(now, []counters.Limit{{Tenant: fmt.Sprintf("t%d", i), Endpoint: "/q", Method: "PUT", Period: time.Second, Threshold: 5}}, 1)
	}
	for _, b := range sender.Prepare(now) {
		if b.Owner == "n0" {
			seed(b.Req) // known series by index, new ones defined
		}
	}
	f.Add([]byte{0x38, 0x01, 0x40, 0x05})
	f.Fuzz(func(t *testing.T, data []byte) {
		var req peerpb.SyncRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			return
		}
		owner, _, _ := setup(t)
		before := owner.Owner().Stats().Windows
		d := owner.recv["n1"]
		session, held := d.session, len(d.keys)
		resp, err := owner.Handle(t0.Add(1300*time.Millisecond), &req)
		// A refused batch changes nothing; a resync answer may make the
		// owner forget the origin's dictionary, but never changes it.
		unchanged := func(why string, mayForget bool) {
			if w := owner.Owner().Stats().Windows; w != before {
				t.Fatalf("%s changed the owner: %d windows, were %d", why, w, before)
			}
			d := owner.recv["n1"]
			if mayForget && d.session == 0 && len(d.keys) == 0 {
				return
			}
			if d.session != session || len(d.keys) != held {
				t.Fatalf("%s changed the dictionary: session %d, %d keys (were %d, %d)", why, d.session, len(d.keys), session, held)
			}
		}
		switch {
		case err != nil:
			unchanged(fmt.Sprintf("refused batch (%v)", err), false)
		case resp.Resync != 0:
			unchanged("a resync answer", true)
		default:
			n := len(globals(t, resp))
			if want := len(req.Reports) + int(req.PackedCount); n != want {
				t.Fatalf("%d totals for %d reports", n, want)
			}
		}
	})
}
