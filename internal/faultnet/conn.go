package faultnet

import (
	"context"
	"fmt"
	"net"
	"sync"
)

// conn is a net.Conn made through an adapter. It is tracked by its Table
// until closed, so a later Cut can close it, and it refuses to read or write
// once its pair is blocked (closing itself), in case data races the Cut.
type conn struct {
	net.Conn
	t       *Table
	blocked func() bool
	alias   string // local address registered to the dialing node, if any
	once    sync.Once
	err     error
}

func newConn(t *Table, c net.Conn, blocked func() bool, alias string) *conn {
	w := &conn{Conn: c, t: t, blocked: blocked, alias: alias}
	t.track(w)
	return w
}

func (c *conn) Read(p []byte) (int, error) {
	if c.blocked() {
		_ = c.Close()
		return 0, fmt.Errorf("faultnet: read %s: %w", c.RemoteAddr(), ErrBlocked)
	}
	return c.Conn.Read(p)
}

func (c *conn) Write(p []byte) (int, error) {
	if c.blocked() {
		_ = c.Close()
		return 0, fmt.Errorf("faultnet: write %s: %w", c.RemoteAddr(), ErrBlocked)
	}
	return c.Conn.Write(p)
}

// Close closes the underlying connection once and stops tracking it.
func (c *conn) Close() error {
	c.once.Do(func() {
		c.t.untrack(c)
		c.err = c.Conn.Close()
	})
	return c.err
}

// Dialer returns a dial function for grpc.WithContextDialer, for the node
// named selfNode. The remote node is found by looking addr up in t (so the
// gRPC listen address of every node must be registered). The dial fails with
// [ErrBlocked] while the pair is cut; a connection established earlier is
// closed when the pair becomes cut, and its Read and Write fail from then on.
//
// gRPC passes the resolved address ("127.0.0.1:port") to the dialer, so
// register that form, e.g. tb.Register("a", gossipAddr, grpcAddr), and use
// grpc.WithContextDialer(faultnet.Dialer(tb, "a")).
func Dialer(t *Table, selfNode string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		blocked := func() bool {
			remote, ok := t.Node(addr)
			return ok && t.BlockedNodes(selfNode, remote)
		}
		if blocked() {
			return nil, fmt.Errorf("faultnet: dial %s from %s: %w", addr, selfNode, ErrBlocked)
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		w := newConn(t, c, blocked, "")
		if blocked() { // cut while we were dialing
			_ = w.Close()
			return nil, fmt.Errorf("faultnet: dial %s from %s: %w", addr, selfNode, ErrBlocked)
		}
		return w, nil
	}
}
