package gossip

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// nameServer is a DNS server on 127.0.0.1 (TCP, as memberlist asks first)
// that answers one name with the addresses it is given, and returns the
// path of a resolv.conf that points at it.
type nameServer struct {
	mu    sync.Mutex
	name  string
	addrs []string
}

func (s *nameServer) set(addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addrs = addrs
}

func (s *nameServer) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	if len(r.Question) == 1 && r.Question[0].Name == s.name {
		s.mu.Lock()
		for _, a := range s.addrs {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: s.name, Rrtype: dns.TypeA, Class: dns.ClassINET},
				A:   net.ParseIP(a),
			})
		}
		s.mu.Unlock()
	}
	_ = w.WriteMsg(m)
}

func startNameServer(t *testing.T, name string) (*nameServer, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ns := &nameServer{name: dns.Fqdn(name)}
	srv := &dns.Server{Listener: lis, Handler: ns}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(conf, []byte("nameserver "+lis.Addr().String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return ns, conf
}

// portFreeOn returns a port that is free, TCP and UDP, on every one of ips
// (several members behind one name share the port, as pods do).
func portFreeOn(t *testing.T, ips ...string) int {
	t.Helper()
next:
	for range 20 {
		l, err := net.Listen("tcp", ips[0]+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		for _, ip := range ips {
			addr := net.JoinHostPort(ip, strconv.Itoa(port))
			tl, err := net.Listen("tcp", addr)
			if err != nil {
				continue next
			}
			ul, err := net.ListenPacket("udp", addr)
			tl.Close()
			if err != nil {
				continue next
			}
			ul.Close()
		}
		return port
	}
	t.Fatalf("no port free on all of %v", ips)
	return 0
}

// TestSeedNameResolvesToEveryAddress: a seed given by name, as a headless
// Service in Kubernetes gives it, with one DNS name answering several
// 127.0.0.x addresses. A node seeded with the name joins every member
// behind it; a member that appears behind the name later (it started alone)
// is found by the rejoin loop, which resolves the name again.
func TestSeedNameResolvesToEveryAddress(t *testing.T) {
	const name = "peers.peerlimit.test"
	ns, conf := startNameServer(t, name)
	ns.set("127.0.0.2", "127.0.0.3")
	port := portFreeOn(t, "127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")
	cfg := func(n, ip string, seeds ...string) Config {
		c := localConfig(n, seeds...)
		c.BindAddr, c.BindPort = ip, port
		c.DNSConfigPath = conf
		return c
	}
	seed := net.JoinHostPort(name, strconv.Itoa(port))
	a := startNode(t, cfg("a", "127.0.0.2")) // a and b start alone
	b := startNode(t, cfg("b", "127.0.0.3"))
	x := startNode(t, cfg("x", "127.0.0.4")) // not behind the name yet
	c := startNode(t, cfg("c", "127.0.0.5", seed))
	waitFor(t, 10*time.Second, "c to join both members behind the name", func() bool {
		return a.sees("a", "b", "c") && b.sees("a", "b", "c") && c.sees("a", "b", "c")
	})
	if !x.sees("x") {
		t.Fatalf("x joined before the name listed it: %v", memberNames(x.snapshot()))
	}
	ns.set("127.0.0.2", "127.0.0.3", "127.0.0.4")
	waitFor(t, 10*time.Second, "the rejoin loop to find x behind the name", func() bool {
		for _, n := range []*testNode{a, b, c, x} {
			if !slices.Equal(memberNames(n.snapshot()), []string{"a", "b", "c", "x"}) {
				return false
			}
		}
		return true
	})
}
