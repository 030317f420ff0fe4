package gossip

import (
	"bytes"
	"slices"
	"testing"
	"time"
)

var (
	key1 = []byte("0123456789abcdef0123456789abcdef") // AES-256
	key2 = []byte("fedcba9876543210")                 // AES-128
)

func withKeys(keys ...[]byte) func(*Config) {
	return func(c *Config) { c.SecretKeys = keys }
}

// tryJoin starts a lone node with cfg and makes it join seed explicitly,
// so that the outcome is known when Join returns. It reports whether the
// join succeeded, after checking that both sides agree.
func tryJoin(t *testing.T, seed *testNode, cfg Config) bool {
	t.Helper()
	n := startNode(t, cfg)
	_, err := n.g.Join([]string{seed.g.LocalMember().Addr})
	if err != nil {
		// The push/pull exchange failed, so neither side merged the
		// other's state.
		if got := memberNames(seed.g.Members()); slices.Contains(got, cfg.Name) {
			t.Fatalf("Join failed (%v) but the seed lists %v", err, got)
		}
		if got := memberNames(n.g.Members()); !slices.Equal(got, []string{cfg.Name}) {
			t.Fatalf("Join failed (%v) but the joiner lists %v", err, got)
		}
		_ = n.g.Shutdown()
		return false
	}
	waitFor(t, 5*time.Second, "both sides to list each other", func() bool {
		return slices.Contains(memberNames(seed.g.Members()), cfg.Name) &&
			slices.Contains(memberNames(n.g.Members()), seed.name)
	})
	return true
}

func TestWrongKeyCannotJoin(t *testing.T) {
	cfg := localConfig("s")
	cfg.SecretKeys = [][]byte{key1}
	s := startNode(t, cfg)

	wrong := localConfig("wrongkey")
	wrong.SecretKeys = [][]byte{key2}
	if tryJoin(t, s, wrong) {
		t.Fatal("a node with the wrong key joined")
	}
	plain := localConfig("nokey")
	if tryJoin(t, s, plain) {
		t.Fatal("a node without a key joined an encrypted cluster")
	}
	right := localConfig("rightkey")
	right.SecretKeys = [][]byte{key1}
	if !tryJoin(t, s, right) {
		t.Fatal("positive control: a node with the right key could not join")
	}
}

func TestWrongLabelCannotJoin(t *testing.T) {
	cfg := localConfig("s")
	cfg.Label = "cluster-a"
	s := startNode(t, cfg)

	wrong := localConfig("wronglabel")
	wrong.Label = "cluster-b"
	if tryJoin(t, s, wrong) {
		t.Fatal("a node with another label joined")
	}
	none := localConfig("nolabel")
	if tryJoin(t, s, none) {
		t.Fatal("a node without a label joined a labelled cluster")
	}
	right := localConfig("rightlabel")
	right.Label = "cluster-a"
	if !tryJoin(t, s, right) {
		t.Fatal("positive control: a node with the right label could not join")
	}
}

func TestKeyRotation(t *testing.T) {
	nodes := startCluster(t, 3, withKeys(key1))
	all := []string{"n0", "n1", "n2"}

	// 1. Install the new key everywhere: it decrypts, key1 still encrypts.
	for _, n := range nodes {
		if err := n.g.InstallKey(key2); err != nil {
			t.Fatal(err)
		}
	}
	// 2. Use it everywhere.
	for _, n := range nodes {
		if err := n.g.UseKey(key2); err != nil {
			t.Fatal(err)
		}
	}
	// 3. Remove the old key everywhere.
	for _, n := range nodes {
		if err := n.g.RemoveKey(key1); err != nil {
			t.Fatal(err)
		}
		keys := n.g.Keys()
		if len(keys) != 1 || !bytes.Equal(keys[0], key2) {
			t.Fatalf("%s keys after rotation: %q", n.name, keys)
		}
		keys[0][0] ^= 0xff // a copy: must not change the keyring
		if !bytes.Equal(n.g.Keys()[0], key2) {
			t.Fatalf("%s: Keys returned the keyring's own slices", n.name)
		}
	}
	if err := nodes[0].g.RemoveKey(key2); err == nil {
		t.Fatal("removing the primary key must fail")
	}

	// The cluster still talks: a graceful leave (a broadcast encrypted with
	// key2) reaches the others, and a node holding only key2 joins, while
	// one holding only key1 cannot.
	old := localConfig("oldkey")
	old.SecretKeys = [][]byte{key1}
	if tryJoin(t, nodes[0], old) {
		t.Fatal("a node with the removed key joined after rotation")
	}
	fresh := localConfig("newkey")
	fresh.SecretKeys = [][]byte{key2}
	if !tryJoin(t, nodes[0], fresh) {
		t.Fatal("a node with the new key could not join after rotation")
	}
	waitConverged(t, nodes, append(all, "newkey"), 10*time.Second)

	if err := nodes[2].g.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	_ = nodes[2].g.Shutdown()
	waitConverged(t, nodes[:2], []string{"n0", "n1", "newkey"}, 10*time.Second)
}
