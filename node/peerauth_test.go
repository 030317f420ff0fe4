package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/peerpb"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

func keysOf(ks ...[]byte) func() [][]byte { return func() [][]byte { return ks } }

// TestPeerAuthTags: a request verifies under any installed key and only
// as it was signed, within the accepted time, once; an answer verifies
// only for the request it answers.
func TestPeerAuthTags(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	now := time.Unix(1_700_000_000, 0)
	req := &peerpb.SyncRequest{Origin: "n1", Incarnation: 7, Reports: []*peerpb.Report{{Tenant: "t", Own: 5}}}
	signer := newPeerAuth(keysOf(k1))
	v, reqTag, err := signer.signRequest(now, req)
	if err != nil {
		t.Fatal(err)
	}

	rotating := newPeerAuth(keysOf(k2, k1)) // k2 primary, k1 still installed
	if _, err := rotating.verifyRequest(now.Add(time.Second), req, v); err != nil {
		t.Fatalf("signed with an installed key: %v", err)
	}
	if _, err := rotating.verifyRequest(now.Add(time.Second), req, v); !errors.Is(err, errAuthReplay) {
		t.Fatalf("the same request again: %v, want a replay", err)
	}
	for name, tc := range map[string]struct {
		keys func() [][]byte
		at   time.Time
		req  *peerpb.SyncRequest
		v    string
		want error
	}{
		"k1 removed":   {keysOf(k2), now, req, v, errAuthBad},
		"no tag":       {keysOf(k1), now, req, "", errAuthMissing},
		"garbage":      {keysOf(k1), now, req, "!!", errAuthBad},
		"changed own":  {keysOf(k1), now, &peerpb.SyncRequest{Origin: "n1", Incarnation: 7, Reports: []*peerpb.Report{{Tenant: "t", Own: 5000}}}, v, errAuthBad},
		"other origin": {keysOf(k1), now, &peerpb.SyncRequest{Origin: "n2", Incarnation: 7, Reports: []*peerpb.Report{{Tenant: "t", Own: 5}}}, v, errAuthBad},
		"too late":     {keysOf(k1), now.Add(authSkew + time.Second), req, v, errAuthStale},
		"too early":    {keysOf(k1), now.Add(-authSkew - time.Second), req, v, errAuthStale},
	} {
		if _, err := newPeerAuth(tc.keys).verifyRequest(tc.at, tc.req, tc.v); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}

	resp := &peerpb.SyncResponse{Totals: []*peerpb.Total{{Global: 9, Grant: 3, HasGrant: true}}, Seq: 4}
	rv, err := rotating.signResponse(reqTag, resp)
	if err != nil {
		t.Fatal(err)
	}
	if err := newPeerAuth(keysOf(k1, k2)).verifyResponse(reqTag, resp, rv); err != nil {
		t.Fatalf("answer signed with k2, k2 installed: %v", err)
	}
	if err := signer.verifyResponse(reqTag, resp, rv); !errors.Is(err, errAuthBad) {
		t.Fatalf("answer signed with k2, only k1 installed: %v", err)
	}
	_, otherTag, _ := signer.signRequest(now.Add(time.Millisecond), req)
	if err := newPeerAuth(keysOf(k2)).verifyResponse(otherTag, resp, rv); !errors.Is(err, errAuthBad) {
		t.Fatalf("answer to another request: %v, want refused", err)
	}
	forged := &peerpb.SyncResponse{Totals: []*peerpb.Total{{Global: 9, Grant: 300, HasGrant: true}}, Seq: 4}
	if err := newPeerAuth(keysOf(k2)).verifyResponse(reqTag, forged, rv); !errors.Is(err, errAuthBad) {
		t.Fatalf("changed answer: %v, want refused", err)
	}
}

func startKeyedCluster(t *testing.T, n int, key []byte) *testCluster {
	return startCluster(t, n, clusterOpts{sync: 100 * time.Millisecond, configure: func(c *Config) {
		c.Gossip.SecretKeys = [][]byte{key}
		// A first request waits for its owner's answer; on a machine
		// starved by the attacker's loop under -race, let it wait long
		// enough that a denial can only come from the limit.
		c.PendingWait = 3 * time.Second
	}})
}

// TestSyncNeedsTheGossipKey: on a cluster whose gossip has a secret key, a
// process without the key (or with another one) dials the members' peer
// ports and reports a million requests of a tenant in the name of the
// members, at full speed: every call is refused before it touches a count
// and counted in a metric, the tenant is admitted every request it sends
// under its limit, and the members' own sync keeps working.
func TestSyncNeedsTheGossipKey(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	c := startKeyedCluster(t, 3, key)
	// A day-long window, so that the 10 s of load stay in one.
	victim := counters.Limit{Tenant: "victim", Endpoint: "/p", Method: "PUT", Period: 24 * time.Hour, Threshold: 1000}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	forged := make(chan int, 1)
	go func() { // the attacker
		n := 0
		defer func() { forged <- n }()
		wrong := newPeerAuth(keysOf(bytes.Repeat([]byte{8}, 32)))
		var clients []peerpb.PeerClient
		for _, nd := range c.nodes {
			conn, err := grpc.NewClient(nd.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return
			}
			defer conn.Close()
			clients = append(clients, peerpb.NewPeerClient(conn))
		}
		for ctx.Err() == nil {
			for i, cl := range clients {
				now := time.Now()
				ws := now.Truncate(victim.Period)
				req := &peerpb.SyncRequest{Origin: c.nodes[(i+1)%len(c.nodes)].Name(), Incarnation: uint64(now.UnixNano()), Reports: []*peerpb.Report{{
					Tenant: victim.Tenant, Endpoint: victim.Endpoint, Method: victim.Method, PeriodMs: victim.Period.Milliseconds(),
					WindowStartMs: ws.UnixMilli(), Threshold: victim.Threshold, Own: 1_000_000, Demand: 1_000_000,
				}}}
				callCtx := ctx
				if n%2 == 1 { // half with a tag under a wrong key
					v, _, _ := wrong.signRequest(now, req)
					callCtx = metadata.AppendToOutgoingContext(ctx, authHeader, v)
				}
				_, err := cl.Sync(callCtx, req)
				if ctx.Err() != nil {
					return
				}
				if status.Code(err) != codes.Unauthenticated {
					t.Errorf("forged sync to %s: %v, want Unauthenticated", c.nodes[i].Name(), err)
					return
				}
				n++
			}
		}
	}()

	// The victim sends 30 requests a second for 10 s, round-robin.
	admitted, sent := 0, 0
	tick := time.NewTicker(time.Second / 30)
	defer tick.Stop()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		<-tick.C
		d, err := c.nodes[sent%3].Take(context.Background(), []counters.Limit{victim}, 1)
		if err != nil {
			t.Fatal(err)
		}
		sent++
		if d.Allowed {
			admitted++
		}
	}
	cancel()
	n := <-forged
	if admitted != sent {
		t.Errorf("victim admitted %d of %d under its limit while forged reports arrived", admitted, sent)
	}
	if n < 50 {
		t.Errorf("only %d forged calls made", n)
	}
	var refused float64
	for _, nd := range c.nodes {
		refused += counterValue(nd.m.authRefused)
		if ok := counterValue(nd.m.syncOK); ok == 0 {
			t.Errorf("%s: none of its own sync calls succeeded", nd.Name())
		}
	}
	if int(refused) < n || int(refused) > n+len(c.nodes) { // the last ones may be cut short by the cancel
		t.Errorf("%v calls counted refused, %d forged", refused, n)
	}
	// No node ever saw the forged count, and the owner's total is exact.
	waitFor(t, 10*time.Second, "the victim's owner total at what was admitted", func() bool {
		var own, top int64
		for _, nd := range c.nodes {
			g, o := globalOf(nd, victim)
			own, top = own+o, max(top, g)
		}
		if top > own {
			t.Fatalf("a node saw a global of %d for the victim, its nodes admitted %d", top, own)
		}
		return own == int64(admitted) && top == own
	})
	t.Logf("victim %d of %d admitted; %d forged calls refused", admitted, sent, n)
}

// TestSyncKeyRotationUnderLoad: rotating the gossip key (install the new
// key everywhere, use it everywhere, remove the old one everywhere) while
// the members sync refuses no honest call and loses no count; afterwards a
// process holding only the old key is refused.
func TestSyncKeyRotationUnderLoad(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte{3}, 32), bytes.Repeat([]byte{4}, 32)
	c := startKeyedCluster(t, 3, oldKey)
	l := counters.Limit{Tenant: "rot", Endpoint: "/p", Method: "GET", Period: 24 * time.Hour, Threshold: 1_000_000}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int64, 1)
	go func() {
		var admitted int64
		defer func() { done <- admitted }()
		for i := 0; ctx.Err() == nil; i++ {
			d, err := c.nodes[i%3].Take(context.Background(), []counters.Limit{l}, 1)
			if err == nil && d.Allowed {
				admitted++
			}
			if i%50 == 49 {
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
	}()
	// Each step waits for a few sync rounds on every node, so that calls
	// signed before and after it cross.
	rounds := func() {
		for _, nd := range c.nodes {
			for i := 0; i < 3; i++ {
				<-nd.nextRound()
			}
		}
	}
	rounds()
	for _, step := range []struct {
		name string
		do   func(*Node) error
	}{
		{"install", func(nd *Node) error { return nd.Gossip().InstallKey(newKey) }},
		{"use", func(nd *Node) error { return nd.Gossip().UseKey(newKey) }},
		{"remove", func(nd *Node) error { return nd.Gossip().RemoveKey(oldKey) }},
	} {
		for _, nd := range c.nodes {
			if err := step.do(nd); err != nil {
				t.Fatalf("%s on %s: %v", step.name, nd.Name(), err)
			}
			rounds()
		}
	}
	cancel()
	admitted := <-done
	for _, nd := range c.nodes {
		// Refusals, either way (calls and answers); a call that timed out
		// on a loaded machine is no refusal.
		if r := counterValue(nd.m.authRefused); r != 0 {
			t.Errorf("%s: %v calls or answers refused during the rotation", nd.Name(), r)
		}
	}
	waitFor(t, 5*time.Second, fmt.Sprintf("every node's global at the %d admitted", admitted), func() bool {
		for _, nd := range c.nodes {
			if g, _ := globalOf(nd, l); g != admitted {
				return false
			}
		}
		return true
	})
	// The old key no longer opens the peer port.
	conn, err := grpc.NewClient(c.nodes[0].GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := &peerpb.SyncRequest{Origin: c.nodes[1].Name(), Incarnation: 1}
	v, _, _ := newPeerAuth(keysOf(oldKey)).signRequest(time.Now(), req)
	_, err = peerpb.NewPeerClient(conn).Sync(metadata.AppendToOutgoingContext(context.Background(), authHeader, v), req)
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a call signed with the removed key: %v, want Unauthenticated", err)
	}
}

// TestKeyedClusterRefusesOutsiders: on a 3-node cluster with a gossip key,
// a node with another key, with the key but another label, or with a key
// the cluster removed cannot join (Start fails with ErrNoSeed under a
// JoinTimeout, and no member ever sees it), and a second process with the
// key and a live member's name is refused with ErrNameConflict; the
// member's counts are untouched.
func TestKeyedClusterRefusesOutsiders(t *testing.T) {
	oldKey, key := bytes.Repeat([]byte{5}, 32), bytes.Repeat([]byte{6}, 32)
	c := startCluster(t, 3, clusterOpts{sync: 100 * time.Millisecond, configure: func(c *Config) {
		c.Gossip.SecretKeys = [][]byte{oldKey}
		c.Gossip.Label = "prod"
		c.PendingWait = 3 * time.Second // see startKeyedCluster
	}})
	for _, step := range []func(*Node) error{
		func(n *Node) error { return n.Gossip().InstallKey(key) },
		func(n *Node) error { return n.Gossip().UseKey(key) },
		func(n *Node) error { return n.Gossip().RemoveKey(oldKey) },
	} {
		for _, n := range c.nodes {
			if err := step(n); err != nil {
				t.Fatal(err)
			}
		}
	}
	l := counters.Limit{Tenant: "own", Endpoint: "/p", Method: "GET", Period: 24 * time.Hour, Threshold: 1000}
	for i := 0; i < 5; i++ {
		if d, err := c.nodes[0].Take(context.Background(), []counters.Limit{l}, 1); err != nil || !d.Allowed {
			t.Fatalf("take %d: %+v %v", i, d, err)
		}
	}
	c.nodes[0].SyncOnce(context.Background())
	g0, own0 := globalOf(c.nodes[0], l)

	try := func(name string, keys [][]byte, label string) error {
		cfg := LocalConfig(name)
		cfg.Logger = c.nodes[0].log.With("outsider", name)
		cfg.Gossip.SecretKeys, cfg.Gossip.Label = keys, label
		cfg.Gossip.Seeds = []string{c.nodes[0].GossipAddr(), c.nodes[1].GossipAddr()}
		cfg.Gossip.JoinTimeout = 2 * time.Second
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = n.Start(context.Background())
		if err == nil {
			n.Close(context.Background())
		}
		return err
	}
	for _, tc := range []struct {
		name  string
		keys  [][]byte
		label string
		want  error
	}{
		{"nokey", nil, "prod", ErrNoSeed},
		{"wrongkey", [][]byte{bytes.Repeat([]byte{9}, 32)}, "prod", ErrNoSeed},
		{"oldkey", [][]byte{oldKey}, "prod", ErrNoSeed},
		{"wronglabel", [][]byte{key}, "staging", ErrNoSeed},
		{c.nodes[1].Name(), [][]byte{key}, "prod", ErrNameConflict},
	} {
		if err := try(tc.name, tc.keys, tc.label); !errors.Is(err, tc.want) {
			t.Errorf("%s: Start = %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, n := range c.nodes {
		if got := fmt.Sprint(n.Engine().Members()); got != fmt.Sprint(names(c.nodes)) {
			t.Errorf("%s sees %s after the outsiders", n.Name(), got)
		}
	}
	c.nodes[0].SyncOnce(context.Background())
	if g, own := globalOf(c.nodes[0], l); g != g0 || own != own0 || g != 5 {
		t.Errorf("counts moved: global %d own %d, were %d and %d", g, own, g0, own0)
	}
}

// BenchmarkSyncAuth measures what authentication adds to one sync call of
// 100 reports: the sender's tag, the receiver's check (with its replay
// cache), the answer's tag and its check.
func BenchmarkSyncAuth(b *testing.B) {
	a := newPeerAuth(keysOf(bytes.Repeat([]byte{1}, 32)))
	req := &peerpb.SyncRequest{Origin: "n1", Incarnation: 1}
	resp := &peerpb.SyncResponse{}
	for i := range 100 {
		req.Reports = append(req.Reports, &peerpb.Report{Tenant: fmt.Sprintf("tenant-%d", i), Endpoint: "/v1/organizations/{orgId}/product/*",
			Method: "GET", PeriodMs: 10_000, WindowStartMs: t0.UnixMilli(), Threshold: 1000, Own: int64(i), Demand: 3, Cap: 40, HasGrant: true})
		resp.Totals = append(resp.Totals, &peerpb.Total{Global: int64(i), Grant: 40, HasGrant: true})
	}
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond) // a new request each time, not a replay
		v, tg, err := a.signRequest(now, req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := a.verifyRequest(now, req, v); err != nil {
			b.Fatal(err)
		}
		rv, _ := a.signResponse(tg, resp)
		if err := a.verifyResponse(tg, resp, rv); err != nil {
			b.Fatal(err)
		}
	}
}
