//go:build unix

package httpfilter

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestReloaderSIGHUP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "limits.yaml")
	writeFile(t, path, limitsV1)
	cfg := DefaultReloaderConfig(path)
	cfg.Interval = 0 // only the signal can reload
	r, _ := newTestReloader(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, limitsV2)
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the reload on SIGHUP", func() bool { return threshold(r.Limits(), "get-product") == 5000 })
	cancel()
	select {
	case <-r.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("loop did not stop after cancel")
	}
}
