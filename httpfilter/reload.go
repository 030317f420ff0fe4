package httpfilter

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrStarted is returned by [Reloader.Start] when the reloader already runs.
var ErrStarted = errors.New("httpfilter: reloader already started")

// minPollInterval bounds polling so a typo cannot turn it into a busy loop.
const minPollInterval = 10 * time.Millisecond

// racyWindow: a file whose mtime is this close to (or after) the moment we
// last read it may have been rewritten since within the filesystem's
// timestamp granularity with the same size, so an unchanged (mtime, size)
// is only trusted once the last read happened this long after the mtime.
// Otherwise the content is read and hashed again (the "racy git" rule).
const racyWindow = 2 * time.Second

// ReloaderConfig configures a [Reloader]. Start from
// [DefaultReloaderConfig].
type ReloaderConfig struct {
	// Path of the limits file. Required.
	Path string
	// Interval between two polls of the file. A poll stats the file and
	// re-reads it only if its mtime or size changed (or its mtime is too
	// recent to trust); a changed content hash triggers a parse and swap.
	// Default 2s. Shorter notices edits sooner at the cost of a stat per
	// interval; 0 disables polling (reload only on a signal or an explicit
	// Reload call). Must be 0 or >= 10ms.
	Interval time.Duration
	// Signals that trigger a reload. Default [syscall.SIGHUP]. Empty: no
	// signal handling. Note that signal delivery is process-wide: every
	// started Reloader receives them.
	Signals []os.Signal
	// Logger receives one record per reload outcome (Info on a swap, Error
	// on a file that does not load, Warn when the file cannot be read).
	// nil discards.
	Logger *slog.Logger
	// Options are passed to [Parse] on every load, e.g. [WithTenantFuncs] so
	// that a reload referring to an unregistered func is refused.
	Options []Option
	// OnReload, if not nil, is called after every successful swap with the
	// previous and the new limits, on the goroutine that reloaded (the
	// polling loop, or the caller of Reload/Poll). It must not block long.
	OnReload func(old, cur *Limits)
}

// DefaultReloaderConfig returns the defaults for the file at path: poll
// every 2s, reload on SIGHUP, no logging.
func DefaultReloaderConfig(path string) ReloaderConfig {
	return ReloaderConfig{
		Path:     path,
		Interval: 2 * time.Second,
		Signals:  []os.Signal{syscall.SIGHUP},
	}
}

// Validate reports the first invalid field.
func (c ReloaderConfig) Validate() error {
	switch {
	case c.Path == "":
		return errors.New("httpfilter: ReloaderConfig.Path: required")
	case c.Interval < 0:
		return fmt.Errorf("httpfilter: ReloaderConfig.Interval: must be >= 0, got %v", c.Interval)
	case c.Interval > 0 && c.Interval < minPollInterval:
		return fmt.Errorf("httpfilter: ReloaderConfig.Interval: must be 0 (no polling) or >= %v, got %v", minPollInterval, c.Interval)
	}
	return nil
}

// Reloader holds the current [Limits] of a file and replaces them when the
// file changes. Readers call [Reloader.Limits] (an atomic load) on every
// request. A reload that fails keeps the previous limits.
//
// Create it with [NewReloader]; the zero value is not usable. All methods
// are safe for concurrent use.
type Reloader struct {
	cfg  ReloaderConfig
	log  *slog.Logger
	cur  atomic.Pointer[Limits]
	done chan struct{}

	started atomic.Bool

	mu        sync.Mutex // serialises loads; guards the fields below
	stat      fileStat   // (mtime, size) at the last read
	readAt    time.Time  // when the last read started
	hash      [32]byte   // SHA-256 of the content last read, valid or not
	lastErr   error      // error of the content last read, nil if it loaded
	statError bool       // the last stat failed (log once)
}

type fileStat struct {
	mtime time.Time
	size  int64
}

// NewReloader loads the file once and returns a Reloader holding it. An
// invalid file is an error: a service should not start with limits it
// cannot read. It starts no goroutine; see [Reloader.Start].
func NewReloader(cfg ReloaderConfig) (*Reloader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Reloader{cfg: cfg, log: cfg.Logger, done: make(chan struct{})}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.log = r.log.With("component", "httpfilter.reloader", "path", cfg.Path)
	st, err := statFile(cfg.Path)
	if err != nil {
		return nil, err
	}
	readAt := time.Now()
	data, err := readLimited(cfg.Path)
	if err != nil {
		return nil, err
	}
	l, err := Parse(cfg.Path, data, cfg.Options...)
	if err != nil {
		return nil, err
	}
	r.cur.Store(l)
	r.stat, r.readAt, r.hash = st, readAt, l.Digest
	return r, nil
}

// Limits returns the limits in force. It never returns nil.
func (r *Reloader) Limits() *Limits { return r.cur.Load() }

func statFile(path string) (fileStat, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStat{}, fmt.Errorf("httpfilter: stat limits: %w", err)
	}
	return fileStat{mtime: fi.ModTime(), size: fi.Size()}, nil
}

// Reload re-reads and parses the file now, whatever its mtime, and swaps the
// limits if the content changed and loads. On error the previous limits stay
// in force and the error is logged and returned. Unchanged content is not an
// error and swaps nothing.
func (r *Reloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, err := statFile(r.cfg.Path)
	if err != nil {
		r.log.Warn("limits reload failed, keeping the previous limits", "err", err)
		return err
	}
	_, err = r.load(st, true)
	return err
}

// Poll is one step of the polling loop: it reloads if the file changed
// since the last read. It reports whether the limits were swapped. A file
// that does not load is logged once per distinct content and keeps the
// previous limits; its error is returned by every Poll until the file
// changes.
//
// The freshness rule compares file timestamps with the wall clock, so it
// uses time.Now (a fake clock would be meaningless against a real
// filesystem).
func (r *Reloader) Poll() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, err := statFile(r.cfg.Path)
	if err != nil {
		if !r.statError {
			r.log.Warn("cannot stat limits file, keeping the previous limits", "err", err)
		}
		r.statError = true
		return false, err
	}
	r.statError = false
	if st.size == r.stat.size && st.mtime.Equal(r.stat.mtime) && r.readAt.Sub(st.mtime) > racyWindow {
		return false, r.lastErr
	}
	return r.load(st, false)
}

// load reads, hashes and (if the content changed) parses the file and
// swaps the limits. force re-parses content already known to be invalid
// (an explicit Reload) and logs again. r.mu must be held.
func (r *Reloader) load(st fileStat, force bool) (bool, error) {
	readAt := time.Now()
	data, err := readLimited(r.cfg.Path)
	if err != nil {
		r.log.Warn("cannot read limits file, keeping the previous limits", "err", err)
		return false, err
	}
	h := sha256.Sum256(data)
	r.stat, r.readAt = st, readAt
	cur := r.cur.Load()
	if h == cur.Digest {
		r.hash, r.lastErr = h, nil
		return false, nil
	}
	if h == r.hash && r.lastErr != nil && !force {
		return false, r.lastErr // already logged
	}
	r.hash = h
	l, err := Parse(r.cfg.Path, data, r.cfg.Options...)
	if err != nil {
		r.lastErr = err
		r.log.Error("limits file does not load, keeping the previous limits", "err", err)
		return false, err
	}
	r.lastErr = nil
	r.cur.Store(l)
	enabled := 0
	for i := range l.SLAs {
		if l.SLAs[i].Enabled {
			enabled++
		}
	}
	r.log.Info("limits reloaded", "slas", len(l.SLAs), "enabled", enabled)
	if r.cfg.OnReload != nil {
		r.cfg.OnReload(cur, l)
	}
	return true, nil
}

// Start starts the loop that polls the file every Interval and reloads on
// the configured signals, until ctx ends. Signal handling is registered
// before Start returns and removed when the loop ends. It returns
// [ErrStarted] if called twice.
func (r *Reloader) Start(ctx context.Context) error {
	if !r.started.CompareAndSwap(false, true) {
		return ErrStarted
	}
	var sig chan os.Signal
	if len(r.cfg.Signals) > 0 {
		sig = make(chan os.Signal, 1)
		signal.Notify(sig, r.cfg.Signals...)
	}
	var tick <-chan time.Time
	var ticker *time.Ticker
	if r.cfg.Interval > 0 {
		ticker = time.NewTicker(r.cfg.Interval)
		tick = ticker.C
	}
	go func() {
		defer close(r.done)
		if sig != nil {
			defer signal.Stop(sig)
		}
		if ticker != nil {
			defer ticker.Stop()
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick:
				_, _ = r.Poll() // outcome logged by Poll
			case s := <-sig:
				r.log.Info("reloading limits on signal", "signal", s.String())
				_ = r.Reload() // outcome logged by Reload
			}
		}
	}()
	return nil
}

// Done is closed when the loop started by Start has ended (after ctx ended).
func (r *Reloader) Done() <-chan struct{} { return r.done }
