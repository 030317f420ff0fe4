package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/peerlimit/peerlimit/counters"
)

// ErrInvalidArgument is wrapped by the error [PerRequest.Take] returns for
// arguments it cannot count: empty tenant and endpoint, a period that is not
// a positive whole number of milliseconds, a negative threshold or cost, or
// a key longer than MaxKeyLen.
var ErrInvalidArgument = errors.New("invalid argument")

// PerRequest is the design peerlimit replaces, kept for comparison: the
// seed-001 style central counter, one Redis round trip per decision
// (INCRBY of the cost, then PEXPIREAT at window end + Grace, pipelined). It
// is exact, whatever the number of instances, and costs a network round trip
// on every request, where a Store costs one per sync interval and decisions
// stay local. BenchmarkPerRequestTake measures the difference.
//
// Denied requests are counted too, as in the Salesforce filter (whose
// counter is incremented before it is compared with the limit): the INCRBY
// comes first, its result decides, and nothing is undone on a deny. Undoing
// would cost a second round trip per deny and would race with concurrent
// callers anyway. Consequences:
//   - with cost 1, exactly threshold requests are admitted per window, no
//     matter how many callers race: INCRBY is atomic and request k sees
//     count k;
//   - once over the limit a tenant stays denied for the rest of the window
//     however it backs off (as with any fixed window);
//   - with mixed costs, a denied expensive request still uses up budget that
//     later cheap requests could have had, so admissions can fall short of
//     threshold (never exceed it).
//
// The zero value is not usable; create one with [NewPerRequest]. A
// PerRequest is safe for concurrent use. Close it when done.
type PerRequest struct {
	cfg     Config
	graceMs int64
	rdb     *redis.Client
}

// NewPerRequest returns a PerRequest limiter for cfg. It does no I/O and
// starts no goroutines.
func NewPerRequest(cfg Config) (*PerRequest, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &PerRequest{
		cfg:     cfg,
		graceMs: cfg.Grace.Milliseconds(),
		// INCRBY is not idempotent: a retry after a lost reply would count
		// the request twice. No retries.
		rdb: redis.NewClient(cfg.options(-1)),
	}, nil
}

// Close closes the connections to Redis. Calls after Close fail.
func (p *PerRequest) Close() error {
	if err := p.rdb.Close(); err != nil {
		return fmt.Errorf("redisstore: close: %w", err)
	}
	return nil
}

// Take charges cost to the window of (tenant, endpoint, method, period)
// that holds now (start = floor(now / period) * period on the Unix clock)
// and reports whether the request is within threshold, and how much of
// threshold is left (0 once over). A cost of 0 reads the count without
// changing it. See [PerRequest] for how denied requests count.
//
// The window's key expires at window end + Config.Grace, an absolute time
// every caller agrees on; Redis's clock decides when that is. So now must
// come from a clock close to Redis's: a now more than Grace behind it names
// a window Redis has already expired, whose key is deleted as soon as it is
// written, and every such request is admitted. A Redis that
// cannot be reached or does not answer within Config.Timeout gives
// allowed false and an error wrapping [ErrUnavailable]: the caller decides
// whether to fail open or closed.
func (p *PerRequest) Take(ctx context.Context, tenant, endpoint, method string, period time.Duration, threshold, cost int64, now time.Time) (allowed bool, remaining int64, err error) {
	bad := func(format string, args ...any) (bool, int64, error) {
		return false, 0, fmt.Errorf("redisstore: take: %w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	if tenant == "" && endpoint == "" {
		return bad("tenant and endpoint are both empty")
	}
	if period < time.Millisecond || period%time.Millisecond != 0 {
		return bad("period %v is not a positive whole number of milliseconds", period)
	}
	if threshold < 0 {
		return bad("threshold %d < 0", threshold)
	}
	if cost < 0 {
		return bad("cost %d < 0", cost)
	}
	periodMs := period.Milliseconds()
	startMs := counters.WindowStart(now.UnixMilli(), periodMs)
	if n := keyLen(p.cfg.KeyPrefix, kindRequest, tenant, endpoint, method, periodMs, startMs); n > MaxKeyLen {
		return bad("key is %d bytes, more than %d", n, MaxKeyLen)
	}
	key := string(appendKey(make([]byte, 0, 64), p.cfg.KeyPrefix, kindRequest, tenant, endpoint, method, periodMs, startMs))

	tctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	pipe := p.rdb.Pipeline()
	incr := pipe.IncrBy(tctx, key, cost)
	pipe.PExpireAt(tctx, key, time.UnixMilli(startMs+periodMs+p.graceMs))
	if _, err := pipe.Exec(tctx); err != nil {
		return false, 0, wrapErr("take", ctx, err)
	}
	count := incr.Val()
	if count > threshold {
		return false, 0, nil
	}
	return true, threshold - count, nil
}
