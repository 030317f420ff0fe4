package redisstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// ErrInvalidConfig is wrapped by every error that [Config.Validate], [New]
// and [NewPerRequest] return for a bad Config.
var ErrInvalidConfig = errors.New("invalid config")

// Bounds enforced by [Config.Validate].
const (
	maxKeyPrefix = 256
	minTimeout   = time.Millisecond
	maxTimeout   = time.Minute
	maxGrace     = 24 * time.Hour
)

// Config says how to reach Redis and how to name and expire counters.
//
// The zero value is not valid (Addr and Timeout are required); start from
// [DefaultConfig] and set Addr. A Config is a plain value: copy it freely.
// Every instance that shares a Redis must use the same KeyPrefix and Grace.
type Config struct {
	// Addr is the Redis server as "host:port". Default: "127.0.0.1:6379".
	// One standalone server (or a proxy in front of several): the batch
	// script touches keys of many series at once, which Redis Cluster
	// would refuse as cross-slot.
	Addr string

	// Username and Password authenticate with AUTH (Username needs Redis 6
	// ACLs; leave it empty for the "default" user). Default: empty, no AUTH.
	Username string
	Password string

	// DB is the database number SELECTed after connecting. Default: 0.
	// Valid: 0 or more (the server's `databases` setting bounds it).
	DB int

	// KeyPrefix starts every key this package writes, so that several
	// clusters (or other applications) can share a database. Default:
	// "peerlimit:". Valid: up to 256 bytes; empty is allowed for a database
	// of its own. It counts against the 1 KiB key limit (see [MaxKeyLen]).
	KeyPrefix string

	// Timeout bounds each call as a whole (Sync, Take, Ping): dialing,
	// writing the batch, Redis running the scripts, reading the replies, and
	// the one EVAL fallback after a NOSCRIPT. Past it the call fails with an
	// error wrapping [ErrUnavailable]. Unit: duration. Default: 100ms. Valid:
	// 1ms to 1 minute.
	//
	// The sync loop must never hang on Redis: a sync interval (typically
	// 100ms to 1s) should stay longer than Timeout so a slow Redis costs one
	// missed sync, not a pile-up. Too short and a healthy but distant Redis,
	// or a big batch, fails every time: a Sync costs a round trip plus ~6µs
	// per report (BenchmarkSync, README.md: 1,000 reports ~6ms, 10,000
	// ~70ms on a loaded 2-core VM), so raise Timeout for nodes that change
	// more than ~5,000 windows per interval. A failure that is only spurious
	// loses nothing but freshness: the cumulative counts make the next sync
	// catch up.
	Timeout time.Duration

	// Grace keeps a window's counters in Redis this long past the window's
	// end before they expire (Redis PEXPIREAT at window end + Grace, the
	// same instant for every instance). Unit: duration, truncated to
	// milliseconds. Default: 2s (the Salesforce filter's window + 2 s).
	// Valid: 0 to 24h.
	//
	// It must cover the lag between a window ending and the last report of
	// it arriving (about one sync interval plus Timeout). Longer costs
	// memory only. A report for a window whose expiry has passed is summed
	// into a key that Redis drops at once, so its total counts only that
	// report. Sliding tiers read a window for one more period after it ends,
	// as the previous window, so a report with ALGORITHM_SLIDING keeps its
	// key until window end + period + Grace.
	Grace time.Duration

	// PoolSize is the most connections kept open to Redis. Default: 0,
	// go-redis's own default (10 per GOMAXPROCS). Valid: 0 or more.
	//
	// A Store needs one connection per concurrent Sync (one per node); a
	// PerRequest limiter needs about as many as requests in flight, or
	// callers queue for a connection (within Timeout).
	PoolSize int

	// TLS, when non-nil, connects with TLS using this configuration (set
	// ServerName, RootCAs and, for mutual TLS, Certificates). Default: nil,
	// plain TCP.
	TLS *tls.Config
}

// DefaultConfig returns the recommended Config: Addr "127.0.0.1:6379",
// KeyPrefix "peerlimit:", Timeout 100ms, Grace 2s, no authentication, no TLS.
func DefaultConfig() Config {
	return Config{
		Addr:      "127.0.0.1:6379",
		KeyPrefix: "peerlimit:",
		Timeout:   100 * time.Millisecond,
		Grace:     2 * time.Second,
	}
}

// Validate reports the first field of c that is out of range. The error names
// the field and wraps [ErrInvalidConfig].
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("redisstore: %w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	if c.Addr == "" {
		return bad("Addr", "empty (want host:port)")
	}
	if _, port, err := net.SplitHostPort(c.Addr); err != nil || port == "" {
		return bad("Addr", "%q is not host:port", c.Addr)
	}
	if c.DB < 0 {
		return bad("DB", "%d is negative", c.DB)
	}
	if len(c.KeyPrefix) > maxKeyPrefix {
		return bad("KeyPrefix", "%d bytes, more than %d", len(c.KeyPrefix), maxKeyPrefix)
	}
	if c.Timeout < minTimeout || c.Timeout > maxTimeout {
		return bad("Timeout", "%v out of range [%v, %v]", c.Timeout, minTimeout, maxTimeout)
	}
	if c.Grace < 0 || c.Grace > maxGrace {
		return bad("Grace", "%v out of range [0, %v]", c.Grace, maxGrace)
	}
	if c.PoolSize < 0 {
		return bad("PoolSize", "%d is negative", c.PoolSize)
	}
	return nil
}

// options turns c into go-redis options. maxRetries is -1 (no retry) for
// operations that are not idempotent.
func (c Config) options(maxRetries int) *redis.Options {
	return &redis.Options{
		Addr:     c.Addr,
		Username: c.Username,
		Password: c.Password,
		DB:       c.DB,
		// Every bound follows Timeout; the per-call context deadline (which
		// go-redis applies to the socket with ContextTimeoutEnabled) is the
		// one that normally fires first.
		DialTimeout:           c.Timeout,
		DialerRetries:         1,
		ReadTimeout:           c.Timeout,
		WriteTimeout:          c.Timeout,
		PoolTimeout:           c.Timeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            maxRetries,
		PoolSize:              c.PoolSize,
		TLSConfig:             c.TLS,
		// No CLIENT SETINFO (Redis < 7.2 rejects it) and no maintenance
		// notifications handshake: one less thing on each new connection.
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}
