// Command wrkbench serves one HTTP endpoint on 127.0.0.1 for load tests
// with wrk (see scripts/wrkbench.sh): an empty handler alone, or behind the
// httpfilter middleware with a limit that admits everything (the allowed
// path, all five rate-limit headers) or one that refuses everything (the
// 429 path), or an empty handler that sets the five headers as constants
// (what the extra bytes cost by themselves).
//
//	wrkbench -mode allowed [-limiter local|node] [-addr 127.0.0.1:0]
//
// It prints the address it listens on as its first line of output, then the
// status and rate-limit headers of one request it makes to itself, and
// serves until interrupted (SIGINT or SIGTERM).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/httpfilter"
	"github.com/peerlimit/peerlimit/node"
	"github.com/prometheus/client_golang/prometheus"
)

// Path is the path wrk requests; the SLA below matches it.
const Path = "/v1/organizations/acme/product/1"

const limitsAllowed = `
slas:
  - id: get-product
    match: {methods: [GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers:
      - {period: 10, threshold: 1000000000}
      - {period: 1, threshold: 100000000}
`

const limitsDenied = `
slas:
  - id: get-product
    match: {methods: [GET], pathPattern: "/v1/organizations/{orgId}/product/*"}
    tiers:
      - {period: 10, threshold: 0}
      - {period: 1, threshold: 0}
`

func main() {
	mode := flag.String("mode", "allowed", "empty (no middleware), allowed (every request admitted), denied (every request refused), "+
		"or headers (no middleware, the five headers as constants)")
	limiter := flag.String("limiter", "local", "local (a counters.Table), node (a started single-member node.Node) "+
		"or none (admits everything without counting: the filter's cost without the counters')")
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the serving to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*mode, *limiter, *addr); err != nil {
		log.Print(err)
	}
}

func run(mode, limiter, addr string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	if mode == "headers" {
		// The five headers as constants, without the middleware: what the
		// extra response bytes cost the server and wrk by themselves.
		static := map[string][]string{
			"X-Ratelimit-Limit":     {"100000000"},
			"X-Ratelimit-Remaining": {"99999999"},
			"X-Ratelimit-Reset":     {"1"},
			"Ratelimit-Policy":      {`"get-product";q=1000000000;w=10, "get-product-1s";q=100000000;w=1`},
			"Ratelimit":             {`"get-product-1s";r=99999999;t=1`},
		}
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hdr := w.Header()
			for k, v := range static {
				hdr[k] = v
			}
		})
	} else if mode != "empty" {
		src := limitsAllowed
		switch mode {
		case "allowed":
		case "denied":
			src = limitsDenied
		default:
			return fmt.Errorf("wrkbench: -mode %q: want empty, allowed, denied or headers", mode)
		}
		limits, err := httpfilter.Parse("wrkbench.yaml", []byte(src))
		if err != nil {
			return err
		}
		var lim httpfilter.Limiter
		reg := prometheus.NewRegistry()
		switch limiter {
		case "local":
			t, err := counters.NewTable(counters.DefaultConfig())
			if err != nil {
				return err
			}
			lim = httpfilter.Local(t)
		case "node":
			n, err := node.New(node.LocalConfig("wrkbench"))
			if err != nil {
				return err
			}
			if err := n.Start(ctx); err != nil {
				return err
			}
			defer n.Close(context.Background())
			lim, reg = n, n.Registry()
		case "none":
			lim = admitAll{}
		default:
			return fmt.Errorf("wrkbench: -limiter %q: want local, node or none", limiter)
		}
		f, err := httpfilter.New(lim, limits, httpfilter.WithRegistry(reg))
		if err != nil {
			return err
		}
		h = f.Middleware(h)
	}

	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Println(lis.Addr().String())

	// One request to show what the load test gets, as the second line.
	go func() {
		res, err := http.Get("http://" + lis.Addr().String() + Path)
		if err != nil {
			fmt.Printf("mode=%s: self-check failed: %v\n", mode, err)
			return
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		line := fmt.Sprintf("mode=%s limiter=%s: %s", mode, limiter, res.Status)
		for _, k := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Ratelimit-Policy", "Ratelimit", "Retry-After"} {
			if v := res.Header.Get(k); v != "" {
				line += " | " + k + ": " + v
			}
		}
		fmt.Println(line)
	}()
	if err := srv.Serve(lis); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// admitAll is a limiter that admits every request without counting, with a
// fixed answer: the filter (matching, headers) without the counters.
type admitAll struct{}

func (admitAll) Take(context.Context, []counters.Limit, int64) (counters.Decision, error) {
	return counters.Decision{Allowed: true, Tier: 1, Limit: 100000000, Remaining: 99999999, Reset: time.Second}, nil
}
