package demo

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// ErrUnknownNode is returned (wrapped) for a node name that is not in the
// plan.
var ErrUnknownNode = errors.New("demo: unknown node")

// NodeAddrs are the three loopback addresses of one node.
type NodeAddrs struct {
	Name   string // n1, n2, ...
	HTTP   string // API, /metrics and /admin: "127.0.0.1:port"
	Gossip string // memberlist, UDP and TCP on the same port
	GRPC   string // peer sync
}

// Plan is the address plan of the whole cluster: every node's name and
// ports, fixed by the parent before any node starts, so that each node can
// register every peer in its partition table and a restarted node comes
// back on the same ports. A Plan is a plain value.
type Plan []NodeAddrs

// NewPlan picks free loopback ports for n nodes named n1..nN. The ports are
// free when picked, and taken below the range the OS picks from for
// outgoing connections and listeners on port 0 (ephemeralPorts), so that
// other processes' connections cannot take one before its node binds it
// (one did, in a CI run: a node failed with "address already in use").
// A process that binds one explicitly in between still makes that node
// fail to start, with an error naming the port.
func NewPlan(n int) (Plan, error) {
	if n < 1 {
		return nil, fmt.Errorf("demo: NewPlan: need at least one node, got %d", n)
	}
	var held []func()
	defer func() {
		for _, release := range held {
			release()
		}
	}()
	lo, hi := planPorts()
	// candidates yields ports to try: random ones in [lo, hi), then 0
	// (the OS picks) once those keep failing.
	candidates := func(yield func(string) bool) {
		for range 200 {
			if !yield("127.0.0.1:" + strconv.Itoa(lo+rand.IntN(hi-lo))) {
				return
			}
		}
		for range 50 {
			if !yield("127.0.0.1:0") {
				return
			}
		}
	}
	// Hold every port until all are picked, so none is picked twice.
	tcp := func() (string, error) {
		for addr := range candidates {
			if l, err := net.Listen("tcp", addr); err == nil {
				held = append(held, func() { l.Close() })
				return l.Addr().String(), nil
			}
		}
		return "", errors.New("no TCP port free")
	}
	gossip := func() (string, error) { // TCP and UDP on the same port
		for addr := range candidates {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				continue
			}
			u, err := net.ListenPacket("udp", l.Addr().String())
			if err != nil {
				l.Close()
				continue
			}
			held = append(held, func() { l.Close(); u.Close() })
			return l.Addr().String(), nil
		}
		return "", errors.New("no port free for both TCP and UDP")
	}
	p := make(Plan, n)
	for i := range p {
		var err error
		p[i].Name = "n" + strconv.Itoa(i+1)
		if p[i].HTTP, err = tcp(); err == nil {
			if p[i].Gossip, err = gossip(); err == nil {
				p[i].GRPC, err = tcp()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("demo: NewPlan: pick a port: %w", err)
		}
	}
	return p, nil
}

// planPorts returns the range NewPlan picks ports from: from 10,000 up to
// the OS's ephemeral range (Linux's net.ipv4.ip_local_port_range, 32,768
// to 60,999 by default), or, if that leaves too few, 10,000 to 30,000.
func planPorts() (lo, hi int) {
	lo, hi = 10_000, 30_000
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	if f := strings.Fields(string(b)); len(f) == 2 {
		if first, err := strconv.Atoi(f[0]); err == nil && first-lo >= 5_000 {
			hi = first
		}
	}
	return lo, hi
}

// Names returns the node names in plan order.
func (p Plan) Names() []string {
	out := make([]string, len(p))
	for i, a := range p {
		out[i] = a.Name
	}
	return out
}

// Index returns the position of the named node.
func (p Plan) Index(name string) (int, error) {
	for i, a := range p {
		if a.Name == name {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w %q (have %s)", ErrUnknownNode, name, strings.Join(p.Names(), ", "))
}

// String encodes the plan for a node's command line:
// "n1=HTTP/GOSSIP/GRPC,n2=...". ParsePlan decodes it.
func (p Plan) String() string {
	parts := make([]string, len(p))
	for i, a := range p {
		parts[i] = a.Name + "=" + a.HTTP + "/" + a.Gossip + "/" + a.GRPC
	}
	return strings.Join(parts, ",")
}

// ParsePlan decodes [Plan.String]. Every address must be a loopback
// "127.0.0.1:port" and every name unique.
func ParsePlan(s string) (Plan, error) {
	if s == "" {
		return nil, errors.New("demo: ParsePlan: empty plan")
	}
	var p Plan
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		name, addrs, ok := strings.Cut(part, "=")
		f := strings.Split(addrs, "/")
		if !ok || name == "" || len(f) != 3 {
			return nil, fmt.Errorf("demo: ParsePlan: %q: want name=http/gossip/grpc", part)
		}
		if seen[name] {
			return nil, fmt.Errorf("demo: ParsePlan: node %q listed twice", name)
		}
		seen[name] = true
		for _, a := range f {
			if err := checkLoopback(a); err != nil {
				return nil, fmt.Errorf("demo: ParsePlan: node %s: %w", name, err)
			}
		}
		p = append(p, NodeAddrs{Name: name, HTTP: f[0], Gossip: f[1], GRPC: f[2]})
	}
	return p, nil
}

// checkLoopback accepts "host:port" where host is a loopback IP or
// "localhost" and port is a number (0 allowed).
func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("address %q: bad port", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("address %q: the demo listens on loopback only", addr)
	}
	return nil
}

// CheckLoopback reports an error unless addr is "host:port" with a loopback
// host, for flags that take a listen address.
func CheckLoopback(addr string) error {
	if err := checkLoopback(addr); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}
