package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the headless browser to drive, or skips (fails on CI).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (apt-get install chromium); the dashboard test needs it on CI")
	}
	t.Skip("chromium not found on PATH")
	return ""
}

var dashboardLine = regexp.MustCompile(`(?m)^dashboard (http://127\.0\.0\.1:\d+)$`)

// The dashboard in a real headless browser: it loads, shows live numbers
// that change, and its partition button splits the membership that the
// nodes report.
func TestDashboard(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	r := startDemo(t, "-rate", "200", "-align=false", "-http", "127.0.0.1:0", "-view=false")
	var url string
	waitFor(t, 30*time.Second, "the dashboard URL and the nodes", func() bool {
		m := dashboardLine.FindStringSubmatch(r.stderr.String())
		if m != nil {
			url = m[1]
		}
		return url != "" && len(r.nodes()) == 3
	})

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()

	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	attr := func(sel, name string) string {
		t.Helper()
		a, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
		if err != nil {
			t.Fatalf("read %s[%s]: %v", sel, name, err)
		}
		return a.Value
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("#members-n3"))); err != nil {
		t.Fatalf("load %s: %v", url, err)
	}
	if title, err := chromedp.Run(ctx, chromedp.Title()); err != nil || title != "peerlimit demo-cluster" {
		t.Fatalf("title %q, %v", title, err)
	}

	// Live numbers: the count of requests sent grows between two reads.
	var first string
	waitFor(t, 20*time.Second, "a request count", func() bool {
		first = text("#cluster-sent")
		return first != "–" && first != "0" && first != ""
	})
	waitFor(t, 10*time.Second, "the request count to change", func() bool { return text("#cluster-sent") != first })
	waitFor(t, 10*time.Second, "every node to see the whole cluster", func() bool {
		for _, n := range []string{"n1", "n2", "n3"} {
			if attr("#members-"+n, "data-members") != "n1 n2 n3" {
				return false
			}
		}
		return true
	})
	if rows := text("#tenants"); !strings.Contains(rows, "org-25") || !strings.Contains(rows, "get-product") {
		t.Fatalf("tenant table: %.200q", rows)
	}

	// The partition button (its field is prefilled with n1,n2|n3).
	if v, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#partition-spec"))); err != nil || v != "n1,n2|n3" {
		t.Errorf("the partition field holds %q (%v), want the prefilled n1,n2|n3", v, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#btn-partition"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the members view to show the split", func() bool {
		return attr("#members-n1", "data-members") == "n1 n2" &&
			attr("#members-n2", "data-members") == "n1 n2" &&
			attr("#members-n3", "data-members") == "n3" &&
			text("#partition-state") == "n1,n2|n3"
	})
	if shot := os.Getenv("DEMO_SCREENSHOT"); shot != "" {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(90))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Clean(shot), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Heal: the members come back together.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#btn-heal"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "heal to join the nodes again", func() bool {
		return attr("#members-n3", "data-members") == "n1 n2 n3" && text("#partition-state") == "none"
	})

	cancel()
	if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := r.wait(20 * time.Second); err != nil {
		t.Fatalf("exit after SIGINT: %v", err)
	}
	r.checkNoNodeLeft(t, time.Second)
}
