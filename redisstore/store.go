package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/peerlimit/peerlimit/peerpb"
)

// defaultChunk is the most keys one script call handles. A batch of up to
// defaultChunk reports is one EVALSHA; a larger one is several EVALSHAs in
// one pipeline, still one round trip. At 1,000 reports one call is ~1.5×
// faster than one EVALSHA per report (BenchmarkSyncChunk: 7.0 ms against
// 10.2 ms, README.md), and chunks of 1,000 cost nothing against one call for
// 10,000 reports (62 ms against 70 ms). The cap bounds how long one script
// holds Redis, which runs scripts one at a time and serves nobody else
// meanwhile: ~3 ms per 1,000 keys on our test machine.
const defaultChunk = 1000

// Store keeps the global counts of every instance in Redis: each instance
// calls Sync once per sync interval with every changed window, and gets the
// global totals back, in one round trip. It plays the part the key's owner
// plays in peer mode, for deployments that prefer a shared Redis.
//
// The zero value is not usable; create one with [New]. A Store is safe for
// concurrent use. Close it when done.
type Store struct {
	cfg     Config
	graceMs int64
	rdb     *redis.Client
	script  *redis.Script
	chunk   int // most keys per script call; tests and benchmarks vary it

	// loaded is true once this Store has seen Redis accept the script with
	// SCRIPT LOAD. While false, Sync sends SCRIPT LOAD ahead of its EVALSHAs
	// in the same pipeline. A NOSCRIPT reply (Redis restarted or flushed its
	// scripts) resets it.
	loaded atomic.Bool
}

// New returns a Store for cfg. It does no I/O and starts no goroutines: a
// Redis that is down at startup makes the first Sync fail (with
// [ErrUnavailable]), not New. Call [Store.Ping] to check the connection
// eagerly.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Store{
		cfg:     cfg,
		graceMs: cfg.Grace.Milliseconds(),
		// Sync is idempotent, so one retry on a broken connection is safe.
		rdb:    redis.NewClient(cfg.options(1)),
		script: redis.NewScript(syncScript),
		chunk:  defaultChunk,
	}, nil
}

// Close closes the connections to Redis. Calls after Close fail.
func (s *Store) Close() error {
	if err := s.rdb.Close(); err != nil {
		return fmt.Errorf("redisstore: close: %w", err)
	}
	return nil
}

// Ping checks that Redis answers within Config.Timeout and loads the sync
// script (SCRIPT LOAD), so that the next Sync needs nothing else. An
// unreachable Redis gives an error wrapping [ErrUnavailable].
func (s *Store) Ping(ctx context.Context) error {
	tctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	pipe := s.rdb.Pipeline()
	ping := pipe.Ping(tctx)
	load := pipe.ScriptLoad(tctx, syncScript)
	if _, err := pipe.Exec(tctx); err != nil {
		return wrapErr("ping", ctx, err)
	}
	if err := ping.Err(); err != nil {
		return wrapErr("ping", ctx, err)
	}
	if load.Val() != s.script.Hash() {
		return fmt.Errorf("redisstore: ping: SCRIPT LOAD returned sha1 %q, want %q", load.Val(), s.script.Hash())
	}
	s.loaded.Store(true)
	return nil
}

// Sync adds one instance's counts to the global counts and returns the
// global total of every report, in order (Total.Global; HasGrant is false:
// the store keeps no leases).
//
// origin is the instance's member name and incarnation identifies its run;
// each report carries the run's cumulative own count in one window. Redis
// keeps, per window and per run, the largest count seen, and a total that
// moves by the difference. So a retried, duplicated or stale report never
// counts twice, and a restarted instance (new incarnation) adds to what its
// previous run counted.
//
// The whole batch is one round trip: one script call per 1,000 reports, all
// in one pipeline. The call as a whole is bounded by Config.Timeout; a
// Redis that cannot be reached or does not answer in time gives an error
// wrapping [ErrUnavailable], and the node should fall back. Because reports
// are cumulative, the next successful Sync catches up on everything a
// failed one missed.
//
// If Redis lost its data (restart without persistence), each window's total
// restarts from what origins report next: each origin's cumulative count
// comes back with its next report, so totals recover within one sync
// interval of every origin, and only counts of origins that never report
// again are lost. Redis's script cache is lost too: the NOSCRIPT reply is
// answered with one more round trip that sends the script itself (EVAL).
//
// Sync checks every report before talking to Redis; an invalid report
// (ErrInvalidReport, naming its index) rejects the whole batch. An empty
// batch does nothing and returns no totals.
func (s *Store) Sync(ctx context.Context, origin string, incarnation uint64, reports []*peerpb.Report) ([]*peerpb.Total, error) {
	if err := checkOrigin(origin); err != nil {
		return nil, err
	}
	n := len(reports)
	if n == 0 {
		return nil, nil
	}
	expires := make([]int64, n)
	for i, r := range reports {
		at, err := checkReport(i, r, s.cfg.KeyPrefix, s.graceMs)
		if err != nil {
			return nil, err
		}
		expires[i] = at
	}

	// All keys live in one buffer; the strings point into copies of it.
	keys := make([]string, n)
	var buf []byte
	for i, r := range reports {
		buf = appendKey(buf[:0], s.cfg.KeyPrefix, kindWindow, r.GetTenant(), r.GetEndpoint(), r.GetMethod(), r.GetPeriodMs(), r.GetWindowStartMs())
		keys[i] = string(buf)
	}
	field := originField(origin, incarnation)

	chunk := s.chunk
	nchunks := (n + chunk - 1) / chunk
	args := make([][]any, nchunks)
	for c := range args {
		lo, hi := c*chunk, min(n, (c+1)*chunk)
		a := make([]any, 1, 1+2*(hi-lo))
		a[0] = field
		for i := lo; i < hi; i++ {
			a = append(a, reports[i].GetOwn(), expires[i])
		}
		args[c] = a
	}

	tctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()

	cmds := make([]*redis.Cmd, nchunks)
	pipe := s.rdb.Pipeline()
	var load *redis.StringCmd
	if !s.loaded.Load() {
		// Redis runs a pipeline in order: the EVALSHAs below find it.
		load = pipe.ScriptLoad(tctx, syncScript)
	}
	for c := range cmds {
		lo, hi := c*chunk, min(n, (c+1)*chunk)
		cmds[c] = s.script.EvalSha(tctx, pipe, keys[lo:hi], args[c]...)
	}
	_, err := pipe.Exec(tctx)
	if load != nil && load.Err() == nil {
		s.loaded.Store(true)
	}

	// NOSCRIPT: Redis lost its script cache since the SCRIPT LOAD. Send the
	// failed chunks again with the script itself; nothing of them ran.
	var again []int
	if err != nil {
		for c, cmd := range cmds {
			if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
				again = append(again, c)
			} else if cmd.Err() != nil {
				return nil, wrapErr("sync", ctx, cmd.Err())
			}
		}
		if len(again) == 0 { // a failure outside the commands (e.g. SCRIPT LOAD)
			return nil, wrapErr("sync", ctx, err)
		}
	}
	if len(again) > 0 {
		s.loaded.Store(false)
		pipe := s.rdb.Pipeline()
		for _, c := range again {
			lo, hi := c*chunk, min(n, (c+1)*chunk)
			cmds[c] = s.script.Eval(tctx, pipe, keys[lo:hi], args[c]...)
		}
		if _, err := pipe.Exec(tctx); err != nil {
			return nil, wrapErr("sync", ctx, err)
		}
	}

	totals := make([]*peerpb.Total, n)
	all := make([]peerpb.Total, n) // one allocation for every Total
	for c, cmd := range cmds {
		lo, hi := c*chunk, min(n, (c+1)*chunk)
		vals, err := cmd.Int64Slice()
		if err != nil {
			return nil, fmt.Errorf("redisstore: sync: reply of keys %d to %d: %w", lo, hi-1, err)
		}
		if len(vals) != hi-lo {
			return nil, fmt.Errorf("redisstore: sync: reply of keys %d to %d has %d totals, want %d", lo, hi-1, len(vals), hi-lo)
		}
		for i, v := range vals {
			all[lo+i].Global = v
			totals[lo+i] = &all[lo+i]
		}
	}
	return totals, nil
}
