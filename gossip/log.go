package gossip

import (
	"context"
	"log"
	"log/slog"
	"strings"
)

// slogWriter turns memberlist's "[LEVEL] memberlist: message" lines into
// slog records at the matching level, so memberlist needs no logger of its
// own and nothing is printed to stderr behind the caller's back.
type slogWriter struct {
	l *slog.Logger
	// stopping reports whether the Gossip is shutting down (nil: never).
	stopping func() bool
}

func newMemberlistLogger(l *slog.Logger, stopping func() bool) *log.Logger {
	return log.New(slogWriter{l.With("component", "memberlist"), stopping}, "", 0)
}

var levelPrefixes = []struct {
	prefix string
	level  slog.Level
}{
	{"[DEBUG]", slog.LevelDebug},
	{"[INFO]", slog.LevelInfo},
	{"[WARN]", slog.LevelWarn},
	{"[ERR]", slog.LevelError},
	{"[ERROR]", slog.LevelError},
}

func (w slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for _, lp := range levelPrefixes {
		if rest, ok := strings.CutPrefix(line, lp.prefix); ok {
			line, level = strings.TrimSpace(rest), lp.level
			break
		}
	}
	switch {
	case strings.HasPrefix(line, "memberlist: Conflicting address"):
		// Repeated at every exchange with the other claimant; the Gossip
		// logs each conflict itself, once a minute, with what to do.
		level = slog.LevelDebug
	case strings.Contains(line, "use of closed network connection") && w.stopping != nil && w.stopping():
		// A send racing Shutdown: expected, and no one can act on it.
		// At any other time it is a real error, and keeps its level.
		level = slog.LevelDebug
	}
	ctx := context.Background()
	if w.l.Enabled(ctx, level) {
		w.l.Log(ctx, level, strings.TrimPrefix(line, "memberlist: "))
	}
	return len(p), nil
}
