package httpfilter

import (
	"context"
	"errors"
	"github.com/peerlimit/peerlimit/internal/testutil"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type syncBuffer = testutil.SyncBuffer

var waitFor = testutil.WaitFor

const limitsV1 = `slas:
  - id: get-product
    match: {methods: [GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 10, threshold: 1000}]
  - id: put-product
    match: {methods: [PUT], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 10, threshold: 100}]
`

// V2 changes get-product's threshold and leaves put-product alone.
const limitsV2 = `slas:
  - id: get-product
    match: {methods: [GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 10, threshold: 5000}]
  - id: put-product
    match: {methods: [PUT], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 10, threshold: 100}]
`

const limitsBad = `slas:
  - id: get-product
    match: {methods: [GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers: [{period: 0, threshold: 5000}]
`

// writeFile replaces path atomically, as editors and config management do.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func newTestReloader(t *testing.T, cfg ReloaderConfig) (*Reloader, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	r, err := NewReloader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, logs
}

func threshold(l *Limits, id string) int64 { return l.SLA(id).Tiers[0].Threshold }

func TestReloaderPollStep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	writeFile(t, path, limitsV1)
	var swaps [][2]*Limits
	cfg := DefaultReloaderConfig(path)
	cfg.OnReload = func(old, cur *Limits) { swaps = append(swaps, [2]*Limits{old, cur}) }
	r, logs := newTestReloader(t, cfg)
	v1 := r.Limits()
	if threshold(v1, "get-product") != 1000 {
		t.Fatal("v1 not loaded")
	}

	// Nothing changed.
	if swapped, err := r.Poll(); swapped || err != nil {
		t.Fatalf("Poll on an unchanged file = %v, %v", swapped, err)
	}
	if r.Limits() != v1 {
		t.Fatal("limits replaced without a change")
	}

	// A valid edit is swapped in; put-product keeps its key components.
	writeFile(t, path, limitsV2)
	if swapped, err := r.Poll(); !swapped || err != nil {
		t.Fatalf("Poll after an edit = %v, %v", swapped, err)
	}
	v2 := r.Limits()
	if threshold(v2, "get-product") != 5000 {
		t.Fatalf("threshold = %d after reload", threshold(v2, "get-product"))
	}
	if len(swaps) != 1 || swaps[0] != [2]*Limits{v1, v2} {
		t.Fatalf("OnReload calls = %v", swaps)
	}
	a, b := v1.SLA("put-product"), v2.SLA("put-product")
	if a.Endpoint != b.Endpoint || a.KeyMethod != b.KeyMethod || a.Tiers[0].Period != b.Tiers[0].Period {
		t.Errorf("unchanged SLA changed keys: %q %q -> %q %q", a.Endpoint, a.KeyMethod, b.Endpoint, b.KeyMethod)
	}

	// An invalid edit keeps v2, is reported with its location, logged once.
	writeFile(t, path, limitsBad)
	for i := 0; i < 3; i++ {
		swapped, err := r.Poll()
		if swapped || err == nil || !strings.Contains(err.Error(), path+`:4: sla "get-product": tiers[0].period: must be > 0`) {
			t.Fatalf("Poll %d on a bad file = %v, %v", i, swapped, err)
		}
	}
	if r.Limits() != v2 {
		t.Fatal("bad file replaced the limits")
	}
	if n := strings.Count(logs.String(), "does not load"); n != 1 {
		t.Errorf("bad file logged %d times, want 1:\n%s", n, logs)
	}
	// An explicit Reload tries (and logs) again.
	if err := r.Reload(); err == nil || !errors.Is(err, ErrInvalidLimits) {
		t.Errorf("Reload on a bad file = %v", err)
	}
	if n := strings.Count(logs.String(), "does not load"); n != 2 {
		t.Errorf("after Reload, logged %d times, want 2", n)
	}

	// Back to the content in force: nothing to swap, no error.
	writeFile(t, path, limitsV2)
	if swapped, err := r.Poll(); swapped || err != nil {
		t.Fatalf("Poll after reverting = %v, %v", swapped, err)
	}
	if r.Limits() != v2 || len(swaps) != 1 {
		t.Fatal("revert swapped the limits")
	}

	// The file disappears: keep the limits, warn once.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if swapped, err := r.Poll(); swapped || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Poll on a missing file = %v, %v", swapped, err)
		}
	}
	if err := r.Reload(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Reload on a missing file = %v", err)
	}
	if r.Limits() != v2 {
		t.Fatal("missing file replaced the limits")
	}
	if n := strings.Count(logs.String(), "cannot stat"); n != 1 {
		t.Errorf("missing file logged %d times by Poll, want 1", n)
	}
}

// Poll trusts an unchanged (mtime, size) once the mtime is old enough: it
// does not even read the file. A same-size edit with the mtime forced back
// is then only seen by Reload (SIGHUP).
func TestReloaderPollTrustsOldUnchangedStat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	writeFile(t, path, limitsV1)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	r, _ := newTestReloader(t, DefaultReloaderConfig(path))
	v1 := r.Limits()
	same := strings.Replace(limitsV1, "1000", "2000", 1) // same size
	if len(same) != len(limitsV1) {
		t.Fatal("test content sizes differ")
	}
	writeFile(t, path, same)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if swapped, err := r.Poll(); swapped || err != nil || r.Limits() != v1 {
		t.Fatalf("Poll read a file whose stat did not change: %v, %v", swapped, err)
	}
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	if threshold(r.Limits(), "get-product") != 2000 {
		t.Fatal("Reload did not pick up the edit")
	}
}

func TestNewReloaderErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, limitsV1)
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, limitsBad)
	funcs := filepath.Join(dir, "funcs.yaml")
	writeFile(t, funcs, strings.Replace(limitsV1, "tiers: [{period: 10, threshold: 1000}]",
		"tenant: {func: fromJWT}\n    tiers: [{period: 10, threshold: 1000}]", 1))
	withFuncs := DefaultReloaderConfig(funcs)
	withFuncs.Options = []Option{WithTenantFuncs("other")}
	cases := []struct {
		name string
		cfg  ReloaderConfig
		want string
	}{
		{"no path", ReloaderConfig{}, "ReloaderConfig.Path: required"},
		{"negative interval", ReloaderConfig{Path: good, Interval: -time.Second}, "ReloaderConfig.Interval: must be >= 0"},
		{"tiny interval", ReloaderConfig{Path: good, Interval: time.Millisecond}, "ReloaderConfig.Interval: must be 0 (no polling) or >= 10ms"},
		{"missing file", DefaultReloaderConfig(filepath.Join(dir, "nope.yaml")), "no such file"},
		{"bad file", DefaultReloaderConfig(bad), "bad.yaml:4: sla \"get-product\": tiers[0].period"},
		{"unknown func", withFuncs, `tenant.func: unknown tenant func "fromJWT"`},
	}
	for _, c := range cases {
		if _, err := NewReloader(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	if err := DefaultReloaderConfig(good).Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
	if r, err := NewReloader(ReloaderConfig{Path: good}); err != nil || r.Limits() == nil {
		t.Errorf("zero Interval (no polling) and nil Logger: %v", err)
	}
}

func TestReloaderPollingLoop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	writeFile(t, path, limitsV1)
	cfg := DefaultReloaderConfig(path)
	cfg.Interval = 10 * time.Millisecond
	cfg.Signals = nil
	r, logs := newTestReloader(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start = %v", err)
	}
	writeFile(t, path, limitsV2)
	waitFor(t, 5*time.Second, "the new threshold", func() bool { return threshold(r.Limits(), "get-product") == 5000 })
	writeFile(t, path, limitsBad)
	waitFor(t, 5*time.Second, "the rejection logged", func() bool { return strings.Contains(logs.String(), "does not load") })
	if threshold(r.Limits(), "get-product") != 5000 {
		t.Error("bad file replaced the limits")
	}
	cancel()
	select {
	case <-r.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("loop did not stop after cancel")
	}
}
