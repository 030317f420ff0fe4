package redisstore

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/peerlimit/peerlimit/peerpb"
)

// ErrInvalidReport is wrapped by the error Sync returns when a report (or
// the origin) cannot be stored; the message names the report's index. Sync
// checks the whole batch before it talks to Redis, so such a batch changes
// nothing.
var ErrInvalidReport = errors.New("invalid report")

// MaxKeyLen is the longest Redis key, KeyPrefix included, that Sync and
// Take accept. Keys are built from tenant, endpoint and method, which come
// from requests; the bound keeps a hostile tenant id from bloating Redis.
const MaxKeyLen = 1024

// MaxOwn is the largest cumulative count a report may carry: 2^53 - 1, the
// largest integer the Lua numbers of Redis scripts hold exactly.
const MaxOwn = 1<<53 - 1

// maxOrigin bounds the origin's member name.
const maxOrigin = 256

// Key layout. Every key is
//
//	prefix + kind + "|" + tenant + "|" + endpoint + "|" + method + "|" + period_ms + "|" + window_start_ms
//
// with "\" and "|" escaped as "\\" and "\|" in tenant, endpoint and method,
// so a separator inside a field can never be read as a field boundary and
// two distinct series can never share a key (FuzzKeyInjective). kind keeps
// the Store's hashes ("w", window) and the PerRequest counters ("r") apart.
const (
	kindWindow  = "w"
	kindRequest = "r"
)

// appendKey appends the key of one window to b.
func appendKey(b []byte, prefix, kind, tenant, endpoint, method string, periodMs, startMs int64) []byte {
	b = append(b, prefix...)
	b = append(b, kind...)
	b = append(b, '|')
	b = appendEscaped(b, tenant)
	b = append(b, '|')
	b = appendEscaped(b, endpoint)
	b = append(b, '|')
	b = appendEscaped(b, method)
	b = append(b, '|')
	b = strconv.AppendInt(b, periodMs, 10)
	b = append(b, '|')
	b = strconv.AppendInt(b, startMs, 10)
	return b
}

func appendEscaped(b []byte, s string) []byte {
	if !strings.ContainsAny(s, `\|`) {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c == '|' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return b
}

// escapedLen is len(appendEscaped(nil, s)).
func escapedLen(s string) int {
	return len(s) + strings.Count(s, `\`) + strings.Count(s, "|")
}

// keyLen is len(appendKey(...)) without building the key.
func keyLen(prefix, kind, tenant, endpoint, method string, periodMs, startMs int64) int {
	return len(prefix) + len(kind) + 5 +
		escapedLen(tenant) + escapedLen(endpoint) + escapedLen(method) +
		intLen(periodMs) + intLen(startMs)
}

func intLen(v int64) int {
	n := 1
	if v < 0 {
		n++
	}
	for v >= 10 || v <= -10 {
		v /= 10
		n++
	}
	return n
}

// originField is the hash field that holds one run of one origin:
// "origin/incarnation". The incarnation is all digits, so the last "/" ends
// the origin and distinct (origin, incarnation) pairs never share a field;
// the hash's own fields ("t", "x") have no "/" and never clash with it.
func originField(origin string, incarnation uint64) string {
	return origin + "/" + strconv.FormatUint(incarnation, 10)
}

// checkOrigin validates the origin of a batch.
func checkOrigin(origin string) error {
	if origin == "" {
		return fmt.Errorf("redisstore: sync: %w: origin is empty", ErrInvalidReport)
	}
	if len(origin) > maxOrigin {
		return fmt.Errorf("redisstore: sync: %w: origin is %d bytes, more than %d", ErrInvalidReport, len(origin), maxOrigin)
	}
	return nil
}

// checkReport validates report i of a batch and returns its expiry (Unix
// ms): window end + Grace, plus one period for sliding tiers.
func checkReport(i int, r *peerpb.Report, prefix string, graceMs int64) (expireAtMs int64, err error) {
	bad := func(format string, args ...any) (int64, error) {
		return 0, fmt.Errorf("redisstore: sync: %w: report %d: %s", ErrInvalidReport, i, fmt.Sprintf(format, args...))
	}
	if r == nil {
		return bad("nil")
	}
	if r.GetTenant() == "" && r.GetEndpoint() == "" {
		return bad("tenant and endpoint are both empty")
	}
	period, start := r.GetPeriodMs(), r.GetWindowStartMs()
	if period <= 0 {
		return bad("period_ms %d <= 0", period)
	}
	if start%period != 0 {
		return bad("window_start_ms %d is not a multiple of period_ms %d", start, period)
	}
	if own := r.GetOwn(); own < 0 || own > MaxOwn {
		return bad("own %d out of range [0, %d]", own, MaxOwn)
	}
	if period > (math.MaxInt64-graceMs)/2 {
		return bad("period_ms %d too large", period)
	}
	life := period + graceMs
	if r.GetAlgorithm() == peerpb.Algorithm_ALGORITHM_SLIDING {
		life += period
	}
	if start > math.MaxInt64-life {
		return bad("window_start_ms %d too large", start)
	}
	if n := keyLen(prefix, kindWindow, r.GetTenant(), r.GetEndpoint(), r.GetMethod(), period, start); n > MaxKeyLen {
		return bad("key is %d bytes, more than %d (tenant %d bytes, endpoint %d, method %d)",
			n, MaxKeyLen, len(r.GetTenant()), len(r.GetEndpoint()), len(r.GetMethod()))
	}
	return start + life, nil
}
