package gossip

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// ErrNoSeed is wrapped by the error of a Start that waited
// Config.JoinTimeout without any seed answering, and by [Gossip.Health]
// while the node is alone and none of its seeds answers.
var ErrNoSeed = errors.New("gossip: no seed answered")

// ErrUnreachableGRPCAddr is wrapped by the error of a Start whose
// Config.GRPCAddr is a loopback address while the gossip address peers see
// is not.
var ErrUnreachableGRPCAddr = errors.New("gossip: gRPC address unreachable from peers")

// ErrNoAdvertiseAddr is wrapped by the error of a Start bound to every
// interface (BindAddr 0.0.0.0) on a host without a private address, when
// Config.AdvertiseAddr does not say which address peers should use.
var ErrNoAdvertiseAddr = errors.New("gossip: no address to advertise to peers")

// warnInterval is how often one repeated warning (a name conflict, seeds
// that do not answer) is logged.
const warnInterval = time.Minute

// joinRetry is how often Start retries the seeds while it waits for one
// (Config.JoinTimeout).
const joinRetry = time.Second

// Health reports what is wrong with this node as a probe sees it: nil when
// it runs without a problem, otherwise an error wrapping one or more of
//
//   - [ErrNotStarted] or [ErrClosed];
//   - [ErrNameConflict]: another live node claimed this node's name in the
//     last three rejoin or push/pull intervals (whichever is longer: 15 s
//     under ProfileLocal, 90 s under ProfileLAN);
//   - [ErrNoSeed]: the node is its only member and none of its seeds (its
//     own address aside) answered the last join attempt, so it enforces
//     every limit by itself.
//
// The text says what to change. It is cheap: no network call.
func (g *Gossip) Health() error {
	if _, err := g.running(); err != nil {
		return err
	}
	var errs []error
	if c, at, ok := g.lastSelfConflict(); ok && g.now().Sub(at) < g.conflictHold {
		errs = append(errs, conflictError(c))
	}
	if err := g.aloneError(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// otherSeeds returns the seeds other than this node's own address.
func (g *Gossip) otherSeeds() []string {
	self := g.LocalMember().Addr
	var out []string
	for _, s := range g.cfg.Seeds {
		if s != self {
			out = append(out, s)
		}
	}
	return out
}

// aloneError returns an ErrNoSeed error if the node is its only member
// while it has seeds to join, else nil.
func (g *Gossip) aloneError() error {
	if len(g.Members()) > 1 {
		return nil
	}
	seeds := g.otherSeeds()
	if len(seeds) == 0 {
		return nil
	}
	g.joinMu.Lock()
	last := g.lastJoinErr
	g.joinMu.Unlock()
	return fmt.Errorf("%w: this node is alone and none of the seeds %v answered (%v): it enforces every limit by itself; check Config.Seeds and that the seeds are up",
		ErrNoSeed, seeds, last)
}

// publishGRPCAddr returns the gRPC address to publish to peers: grpcAddr,
// with an empty or unspecified host replaced by the gossip advertise IP. It
// refuses a loopback host while the advertise IP is not loopback.
func publishGRPCAddr(grpcAddr string, advertise net.IP) (string, error) {
	host, port, err := net.SplitHostPort(grpcAddr)
	if err != nil {
		return "", fmt.Errorf("gossip: gRPC address %q: %w", grpcAddr, err)
	}
	ip := net.ParseIP(host)
	switch {
	case host == "" || (ip != nil && ip.IsUnspecified()):
		return net.JoinHostPort(advertise.String(), port), nil
	case (host == "localhost" || (ip != nil && ip.IsLoopback())) && !advertise.IsLoopback():
		return "", fmt.Errorf("%w: the gRPC address %s (Config.GRPCAddr) is a loopback address, but gossip advertises %s to peers: "+
			"they would join the cluster and then fail every sync call; publish an address they can reach "+
			"(an empty host, as in \":%s\", takes the gossip address)", ErrUnreachableGRPCAddr, grpcAddr, advertise, port)
	}
	return grpcAddr, nil
}
