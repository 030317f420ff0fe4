package counters

import (
	"errors"
	"math"
	"time"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"
)

// MaxLimits is the most limits (tiers across all matching SLAs) one Take may
// charge at once. It keeps a decision on fixed-size stack arrays.
const MaxLimits = 32

// Sentinel errors returned by Take.
var (
	ErrTooManyLimits = errors.New("counters: more than MaxLimits limits in one request")
	ErrBadCost       = errors.New("counters: cost must be >= 0, and cost times a limit's weight must fit in an int64")
	ErrBadLimit      = errors.New("counters: limit has a period <= 0, a threshold < 0 or a weight < 0")
	ErrBadKey        = errors.New("counters: limit's tenant, endpoint or method is not valid UTF-8, or together longer than MaxKeyBytes")
)

// MaxKeyBytes bounds the identity of a series (tenant, endpoint and method
// together): a series must be able to travel to its owner, whose peers
// refuse longer keys.
const MaxKeyBytes = 1024

// validIdentity reports whether l's series may be created: its identity is
// valid UTF-8 (the peer protocol carries it as strings) and not longer than
// MaxKeyBytes.
func validIdentity(l *Limit) bool {
	return len(l.Tenant)+len(l.Endpoint)+len(l.Method) <= MaxKeyBytes &&
		utf8.ValidString(l.Tenant) && utf8.ValidString(l.Endpoint) && utf8.ValidString(l.Method)
}

// Limit is one tier of one SLA applied to one tenant: at most Threshold units
// of cost per Period. Tenant, Endpoint, Method and Period identify its
// counter series; Threshold and Algorithm may change (on a config reload)
// without losing the counts.
//
// Endpoint is the endpoint *pattern* (or SLA id), never the concrete path,
// so that /product/1 and /product/2 share a counter.
//
// Weight multiplies the cost of a Take for this limit alone: a request of
// cost c charges c×Weight to it (0 counts as 1). One Take can so charge
// the tiers of several SLAs different amounts, all or none: an export that
// costs 10 units of its own SLA and 1 request of a per-tenant SLA.
type Limit struct {
	Tenant    string
	Endpoint  string
	Method    string
	Period    time.Duration
	Threshold int64
	Algorithm Algorithm
	Weight    int64

	scope uint64 // cached by Prepare; 0 = compute per call
}

// weighted returns cost times l's weight. Take has checked that it fits.
func (l *Limit) weighted(cost int64) int64 {
	if l.Weight > 1 {
		return cost * l.Weight
	}
	return cost
}

// checkWeight reports whether l's weight is valid and cost times it fits
// in an int64.
func (l *Limit) checkWeight(cost int64) error {
	switch {
	case l.Weight < 0:
		return ErrBadLimit
	case l.Weight > 1 && cost > math.MaxInt64/l.Weight:
		return ErrBadCost
	}
	return nil
}

// Key identifies one window of one counter series. It is what instances
// report to owners and what owners sum over origins.
type Key struct {
	Tenant   string
	Endpoint string
	Method   string
	Period   time.Duration
	// WindowStart is the window's start in Unix nanoseconds.
	WindowStart int64
}

// SeriesHash hashes the identity of a counter series (tenant, endpoint,
// method, period). It does not allocate. The window start is left out on
// purpose: a series keeps its owner across windows, so the owner of a
// sliding tier also holds the previous window.
//
// The hash is built from xxhash sums of the fields, mixed asymmetrically, so
// that the part that does not depend on the tenant (the scope) can be
// computed once per tier by Prepare and only the tenant is hashed per request.
func SeriesHash(tenant, endpoint, method string, period time.Duration) uint64 {
	return seriesHash(tenant, scopeHash(endpoint, method, period))
}

func scopeHash(endpoint, method string, period time.Duration) uint64 {
	h := fmix(xxhash.Sum64String(endpoint))
	h = fmix(h ^ xxhash.Sum64String(method))
	return fmix(h ^ uint64(period))
}

func seriesHash(tenant string, scope uint64) uint64 {
	return fmix(xxhash.Sum64String(tenant) ^ scope)
}

// fmix is MurmurHash3's 64-bit finaliser: it spreads every input bit over
// the whole word, so that the low bits (table shard, ring partition) are as
// good as the high ones.
func fmix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// Prepare returns l with the hash of its endpoint, method and period cached,
// so that a Take only hashes the tenant. Callers that build limits from a
// fixed set of tiers (the HTTP filter does) prepare the tiers once and set
// the Tenant per request. Changing Endpoint, Method or Period afterwards
// requires preparing again.
func (l Limit) Prepare() Limit {
	l.scope = scopeHash(l.Endpoint, l.Method, l.Period)
	return l
}

// Hash returns the series hash of l.
func (l *Limit) Hash() uint64 {
	scope := l.scope
	if scope == 0 {
		scope = scopeHash(l.Endpoint, l.Method, l.Period)
	}
	return seriesHash(l.Tenant, scope)
}

// SeriesHash returns the hash of k's series (without the window start).
func (k Key) SeriesHash() uint64 { return SeriesHash(k.Tenant, k.Endpoint, k.Method, k.Period) }
