package node

import (
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// scrape returns what n's MetricsHandler serves.
func scrape(t *testing.T, n *Node) string {
	t.Helper()
	rec := httptest.NewRecorder()
	n.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

// 9. Registries: one registry for two nodes is an error from New that says
// what to do, not a panic; a wrapped Registerer works with a Gatherer; a
// node's own registry serves the Go and process series.
func TestRegistries(t *testing.T) {
	shared := prometheus.NewRegistry()
	cfg := LocalConfig("n1")
	cfg.Registry = shared
	if _, err := New(cfg); err != nil {
		t.Fatal(err)
	}
	cfg = LocalConfig("n2")
	cfg.Registry = shared
	_, err := New(cfg) // panicked before
	if err == nil || !strings.Contains(err.Error(), "WrapRegistererWith") {
		t.Fatalf("second node on one registry: New = %v, want an error saying to wrap it", err)
	}
	t.Logf("second node on one registry: %v", err)

	// One registry, a "node" label per node: both fine, both served.
	reg := prometheus.NewRegistry()
	var nodes []*Node
	for _, name := range []string{"n1", "n2"} {
		cfg := LocalConfig(name)
		cfg.Registry = prometheus.WrapRegistererWith(prometheus.Labels{"node": name}, reg)
		cfg.Gatherer = reg
		n, err := New(cfg)
		if err != nil {
			t.Fatalf("%s with a labelled Registerer: %v", name, err)
		}
		if n.Registry() != nil || n.Registerer() == nil || n.Gatherer() != reg {
			t.Errorf("%s: Registry %v, Registerer %v, Gatherer %v", name, n.Registry(), n.Registerer(), n.Gatherer())
		}
		nodes = append(nodes, n)
	}
	body := scrape(t, nodes[0])
	for _, want := range []string{`peerlimit_members{node="n1"}`, `peerlimit_members{node="n2"}`} {
		if !strings.Contains(body, want) {
			t.Errorf("the shared registry does not serve %s", want)
		}
	}

	// A Gatherer without a Registry is a mistake too.
	cfg = LocalConfig("g")
	cfg.Gatherer = reg
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "Config.Gatherer") {
		t.Errorf("Gatherer without Registry: Validate() = %v, want an error naming Config.Gatherer", err)
	}

	// A prefixed Registerer needs its Gatherer.
	cfg = LocalConfig("p")
	cfg.Registry = prometheus.WrapRegistererWithPrefix("svc_", reg)
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "Config.Gatherer") {
		t.Fatalf("a Registerer that is not a Gatherer, without Gatherer: New = %v, want an error naming Config.Gatherer", err)
	}
	cfg.Gatherer = reg
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if body := scrape(t, n); !strings.Contains(body, "svc_peerlimit_members") {
		t.Errorf("prefixed series not served")
	}

	// The node's own registry: Go and process series beside its own.
	own, err := New(LocalConfig("own"))
	if err != nil {
		t.Fatal(err)
	}
	body = scrape(t, own)
	want := []string{"peerlimit_members", "go_goroutines", "go_memstats_heap_alloc_bytes"}
	if runtime.GOOS == "linux" {
		want = append(want, "process_cpu_seconds_total")
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("the node's own registry does not serve %s", w)
		}
	}
	// A registry of the caller's gets the runtime series on request.
	mine := prometheus.NewRegistry()
	if err := RegisterRuntimeMetrics(mine); err != nil {
		t.Fatal(err)
	}
	cfg = LocalConfig("mine")
	cfg.Registry = mine
	if n, err := New(cfg); err != nil || !strings.Contains(scrape(t, n), "go_goroutines") {
		t.Fatalf("RegisterRuntimeMetrics then New: %v", err)
	}
}
