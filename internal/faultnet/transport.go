package faultnet

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// transport wraps a memberlist.Transport and drops or refuses traffic that
// the Table says is cut.
//
// It deliberately implements only memberlist.Transport, not
// NodeAwareTransport: memberlist v0.7.0 then wraps it in its own shim that
// forwards WriteToAddress and DialAddressTimeout to WriteTo and DialTimeout,
// so every outbound path goes through the checks below.
type transport struct {
	inner memberlist.Transport
	t     *Table
	self  string // our listen address, as registered in t

	packets chan *memberlist.Packet
	streams chan net.Conn
	done    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	err     error
}

// WrapTransport returns a transport that behaves like inner (normally a
// *memberlist.NetTransport) except between nodes that t says are cut:
//
//   - WriteTo a blocked address drops the packet silently (as a lossy
//     network does) and reports success; a one-way cut drops only the
//     packets sent its way;
//   - DialTimeout to a blocked address fails with [ErrBlocked], and streams
//     dialed earlier are closed when the pair becomes cut (either way);
//   - inbound packets whose sender address is blocked are dropped;
//   - inbound streams whose remote address is blocked are closed. A stream's
//     remote address is the dialer's ephemeral port, which is known only when
//     the dialer also went through a wrapped transport on the same Table
//     (it registers its connection's local address for the connection's
//     lifetime) or when a test registered it.
//
// selfAddr is this node's listen address ("127.0.0.1:port"); it must be
// registered in t for outbound checks to apply.
//
// Unlike production code, WrapTransport starts two goroutines at once, which
// filter the inner PacketCh and StreamCh into the wrapper's channels. They
// keep draining the inner channels until Shutdown, so the inner transport's
// Shutdown never blocks on them; Shutdown stops them and waits for them.
func WrapTransport(inner memberlist.Transport, t *Table, selfAddr string) memberlist.Transport {
	w := &transport{
		inner:   inner,
		t:       t,
		self:    selfAddr,
		packets: make(chan *memberlist.Packet),
		streams: make(chan net.Conn),
		done:    make(chan struct{}),
	}
	w.wg.Add(2)
	go w.filterPackets()
	go w.filterStreams()
	return w
}

func (w *transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return w.inner.FinalAdvertiseAddr(ip, port)
}

func (w *transport) WriteTo(b []byte, addr string) (time.Time, error) {
	if w.t.Blocked(w.self, addr) {
		return time.Now(), nil
	}
	return w.inner.WriteTo(b, addr)
}

func (w *transport) PacketCh() <-chan *memberlist.Packet { return w.packets }

func (w *transport) StreamCh() <-chan net.Conn { return w.streams }

func (w *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	blocked := func() bool { return w.t.BlockedConn(w.self, addr) }
	if blocked() {
		return nil, fmt.Errorf("faultnet: dial %s from %s: %w", addr, w.self, ErrBlocked)
	}
	c, err := w.inner.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	alias := ""
	if node, ok := w.t.Node(w.self); ok {
		alias = c.LocalAddr().String()
		w.t.Register(node, alias)
	}
	return newConn(w.t, c, blocked, alias), nil
}

// Shutdown shuts the inner transport down (the filters keep draining it
// meanwhile), then stops the filter goroutines.
func (w *transport) Shutdown() error {
	w.once.Do(func() {
		w.err = w.inner.Shutdown()
		close(w.done)
		w.wg.Wait()
	})
	return w.err
}

func (w *transport) filterPackets() {
	defer w.wg.Done()
	in := w.inner.PacketCh()
	for {
		select {
		case <-w.done:
			return
		case p := <-in:
			if p == nil || (p.From != nil && w.t.Blocked(p.From.String(), w.self)) {
				continue
			}
			select {
			case w.packets <- p:
			case <-w.done:
				return
			}
		}
	}
}

func (w *transport) filterStreams() {
	defer w.wg.Done()
	in := w.inner.StreamCh()
	for {
		select {
		case <-w.done:
			return
		case c := <-in:
			if c == nil {
				continue
			}
			if w.t.BlockedConn(c.RemoteAddr().String(), w.self) {
				_ = c.Close()
				continue
			}
			select {
			case w.streams <- c:
			case <-w.done:
				_ = c.Close()
				return
			}
		}
	}
}
