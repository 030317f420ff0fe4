package redisstore_test

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/peerlimit/peerlimit/peerpb"
	"github.com/peerlimit/peerlimit/redisstore"
)

// A node in Redis mode syncs every changed window once per interval and
// falls back when Redis is unavailable. (Compiled, not run: it needs a
// Redis on 127.0.0.1:6379.)
func Example() {
	cfg := redisstore.DefaultConfig()
	cfg.Addr = "127.0.0.1:6379"
	store, err := redisstore.New(cfg)
	if err != nil {
		panic(err)
	}
	defer store.Close()

	now := time.Now()
	period := int64(10_000) // ms
	reports := []*peerpb.Report{{
		Tenant:        "acme",
		Endpoint:      "/v1/organizations/{orgId}/product/*",
		Method:        "GET",
		PeriodMs:      period,
		WindowStartMs: now.UnixMilli() / period * period,
		Threshold:     1000,
		Own:           42, // this instance's cumulative count in the window
	}}
	totals, err := store.Sync(context.Background(), "node-1", 1, reports)
	switch {
	case errors.Is(err, redisstore.ErrUnavailable):
		slog.Warn("redis unavailable, using the static share", "err", err)
	case err != nil:
		slog.Error("redis sync failed", "err", err)
	default:
		slog.Info("synced", "global", totals[0].GetGlobal())
	}
}
