package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrUnavailable is wrapped, together with its cause, by the error a call
// returns when Redis could not be reached or did not answer within
// Config.Timeout: refused or reset connections, timeouts (a wedged or
// overloaded Redis), a server still loading, busy with a script, or a
// replica that cannot take writes. The node branches on it to fall back:
// fail open to its static share, or fail closed.
//
// Errors that do not wrap it mean Redis answered and said no (a bad
// password, a wrong-type key, a script error) or the input was invalid
// ([ErrInvalidReport], [ErrInvalidArgument]); retrying will not help.
var ErrUnavailable = errors.New("redis unavailable")

// wrapErr turns an error from go-redis into this package's error for op.
// parent is the caller's context (before Timeout was applied): when the
// caller cancelled, the error says so rather than blaming Redis.
func wrapErr(op string, parent context.Context, err error) error {
	if errors.Is(parent.Err(), context.Canceled) {
		return fmt.Errorf("redisstore: %s: %w: %w", op, parent.Err(), err)
	}
	if unavailable(err) {
		return fmt.Errorf("redisstore: %s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("redisstore: %s: %w", op, err)
}

// unavailable says whether err means Redis could not be reached or did not
// answer in time. Anything that is not a Redis error reply is a transport
// failure: dial and I/O errors, EOF, TLS errors, deadlines, pool timeouts.
func unavailable(err error) bool {
	if errors.Is(err, redis.ErrClosed) { // our own Close: not Redis's fault
		return false
	}
	var reply redis.Error
	if !errors.As(err, &reply) {
		return true
	}
	// The Redis error replies that mean "not now" rather than "no".
	msg := reply.Error()
	for _, p := range [...]string{
		"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY",
		"ERR max number of clients",
	} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
