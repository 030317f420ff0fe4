package demo

import (
	"errors"
	"github.com/peerlimit/peerlimit/internal/testutil"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peerlimit/peerlimit/httpfilter"
)

var waitFor = testutil.WaitFor

func TestHistogramBuckets(t *testing.T) {
	// Bounds are contiguous and every value lands in the bucket whose
	// bounds hold it, with a width of at most 1/16 of the lower bound.
	prevHi := uint64(0)
	for i := range histBuckets {
		lo, hi := bucketBounds(i)
		if lo != prevHi {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if lo >= 2*histSub && (hi-lo)*histSub > lo {
			t.Fatalf("bucket %d [%d,%d) wider than 1/16 of its start", i, lo, hi)
		}
		prevHi = hi
		if lo > math.MaxUint64/2 {
			break
		}
	}
	for _, v := range []uint64{0, 1, 15, 16, 31, 32, 33, 63, 64, 1000, 999_999, 1 << 40, math.MaxUint64} {
		i := bucketOf(v)
		lo, hi := bucketBounds(i)
		if v < lo || (v >= hi && hi != 0) {
			t.Errorf("value %d in bucket %d = [%d,%d)", v, i, lo, hi)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	r := rand.New(rand.NewPCG(1, 2))
	var vals []time.Duration
	for range 20000 {
		d := time.Duration(r.ExpFloat64() * float64(20*time.Microsecond))
		vals = append(vals, d)
		h.Record(d)
	}
	h.Record(-time.Second) // counts as 0
	vals = append(vals, 0)
	slices.Sort(vals)
	c := h.Snapshot()
	if c.Total() != uint64(len(vals)) {
		t.Fatalf("total %d, want %d", c.Total(), len(vals))
	}
	for _, q := range []float64{0.5, 0.95, 0.99, 1} {
		exact := vals[int(math.Ceil(q*float64(len(vals))))-1]
		got := c.Quantile(q)
		if rel := math.Abs(float64(got-exact)) / float64(exact); rel > 0.07 {
			t.Errorf("q%.2f = %v, exact %v (%.1f%% off, want <= 7%%)", q, got, exact, 100*rel)
		}
	}
	if (Counts)(nil).Quantile(0.5) != 0 {
		t.Error("empty quantile must be 0")
	}
	// Sparse round trip, Add and Sub.
	back := CountsFromSparse(c.Sparse())
	if !slices.Equal(back, c) {
		t.Fatal("Sparse/CountsFromSparse round trip differs")
	}
	if got := c.Add(c).Sub(c); !slices.Equal(got, c) {
		t.Fatal("c + c - c != c")
	}
	if got := (Counts)(nil).Sub(c).Total(); got != 0 {
		t.Fatalf("0 - c floors at 0, got total %d", got)
	}
	q := c.Quantiles()
	if q.Count != c.Total() || !(q.P50 < q.P95 && q.P95 < q.P99) {
		t.Fatalf("Quantiles = %+v", q)
	}
}

func TestPlan(t *testing.T) {
	p, err := NewPlan(3)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Names(), " "); got != "n1 n2 n3" {
		t.Fatalf("names %q", got)
	}
	seen := map[string]bool{}
	for _, a := range p {
		for _, addr := range []string{a.HTTP, a.Gossip, a.GRPC} {
			if seen[addr] {
				t.Fatalf("address %s picked twice", addr)
			}
			seen[addr] = true
			if err := CheckLoopback(addr); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The gossip port is free for UDP too.
	u, err := net.ListenPacket("udp", p[0].Gossip)
	if err != nil {
		t.Fatalf("gossip port not free for UDP: %v", err)
	}
	u.Close()
	back, err := ParsePlan(p.String())
	if err != nil || !slices.Equal(back, p) {
		t.Fatalf("round trip: %v, %v", back, err)
	}
	if i, err := p.Index("n2"); i != 1 || err != nil {
		t.Fatalf("Index(n2) = %d, %v", i, err)
	}
	if _, err := p.Index("n9"); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("Index(n9): %v", err)
	}
	for _, bad := range []string{
		"",
		"n1=127.0.0.1:1/127.0.0.1:2",
		"n1=10.0.0.1:1/127.0.0.1:2/127.0.0.1:3",
		"n1=127.0.0.1:1/127.0.0.1:2/127.0.0.1:3,n1=127.0.0.1:4/127.0.0.1:5/127.0.0.1:6",
		"n1=127.0.0.1:x/127.0.0.1:2/127.0.0.1:3",
		"=127.0.0.1:1/127.0.0.1:2/127.0.0.1:3",
	} {
		if _, err := ParsePlan(bad); err == nil {
			t.Errorf("ParsePlan(%q) accepted", bad)
		}
	}
	if _, err := NewPlan(0); err == nil {
		t.Error("NewPlan(0) accepted")
	}
}

func TestParsePartition(t *testing.T) {
	all := []string{"n1", "n2", "n3", "n4"}
	tests := []struct {
		spec, want string
		err        error
	}{
		{"", "", nil},
		{"heal", "", nil},
		{"n1,n2|n3,n4", "n1,n2|n3,n4", nil},
		{"{n3,n4}|{n2,n1}", "n1,n2|n3,n4", nil},
		{" n3 ", "n1,n2,n4|n3", nil}, // the unlisted form one group
		{"n1|n2", "n1|n2|n3,n4", nil},
		{"n1,n2,n3,n4", "", nil}, // one group: nothing cut
		{"n1,n5|n2", "", ErrUnknownNode},
		{"n1|n1", "", ErrBadPartition},
		{"n1,|n2", "", ErrBadPartition},
	}
	for _, tt := range tests {
		p, err := ParsePartition(tt.spec, all)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("%q: err %v, want %v", tt.spec, err, tt.err)
			}
			continue
		}
		if err != nil || p.String() != tt.want {
			t.Errorf("%q = %q, %v; want %q", tt.spec, p.String(), err, tt.want)
		}
	}
	p, _ := ParsePartition("n1,n2|n3", all)
	var cuts []string
	p.Cut(func(a, b []string) { cuts = append(cuts, strings.Join(a, ",")+"/"+strings.Join(b, ",")) })
	if got := strings.Join(cuts, " "); got != "n1,n2/n3 n1,n2/n4 n3/n4" {
		t.Fatalf("cuts %q", got)
	}
	if g := p.Group("n4"); !slices.Equal(g, []string{"n4"}) {
		t.Fatalf("Group(n4) = %v", g)
	}
}

func TestParseFaults(t *testing.T) {
	names := []string{"n1", "n2", "n3"}
	fs, err := ParseFaults("9s restart n3; 5s kill n3;; 12s partition n1,n2|n3; 16s heal", names)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fs {
		got = append(got, f.At.String()+" "+f.Action+" "+f.Arg)
	}
	want := []string{"5s kill n3", "9s restart n3", "12s partition n1,n2|n3", "16s heal "}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"kill n3", "5s", "5s explode n1", "5s kill n9", "-1s kill n1", "5s heal n1", "5s partition n1,n2,n3", "5s partition n1|n9"} {
		if _, err := ParseFaults(bad, names); !errors.Is(err, ErrBadFault) {
			t.Errorf("ParseFaults(%q): err %v, want ErrBadFault", bad, err)
		}
	}
}

func seedLimits(t *testing.T) *httpfilter.Limits {
	t.Helper()
	l, err := httpfilter.LoadFile("../../httpfilter/limits.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestBuildWorkloadSeed(t *testing.T) {
	lim := seedLimits(t)
	for _, tt := range []struct {
		rate       float64
		hotGETs    int     // hot tenants hot on GET too
		coldFactor float64 // utilisation of the cold streams
	}{
		{1000, 2, 0.18},        // 125 PUT + 200 + 225 GET = 550 hot; 450 over 20 x 110 + 3 x 100
		{600, 1, 275.0 / 2600}, // 125 + 200 = 325 hot; 275 over 20 x 110 + 4 x 100 req/s of cold limits
		{300, 0, 175.0 / 2700}, // 125 hot; 175 over 20 x 110 + 5 x 100
	} {
		w, err := BuildWorkload(lim, 25, tt.rate)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(w.Rate-tt.rate) > 1e-6 {
			t.Errorf("rate %v: total %v", tt.rate, w.Rate)
		}
		hotPUT, hotGET := 0, 0
		for _, s := range w.Streams {
			lr := s.LimitRate()
			if s.Hot {
				if s.Factor < 2 || s.Factor > 3 || math.Abs(s.Rate-s.Factor*lr) > 1e-9 {
					t.Errorf("rate %v: hot stream %s %s at %v req/s, factor %v", tt.rate, s.Tenant, s.Method, s.Rate, s.Factor)
				}
				if s.Method == "PUT" {
					hotPUT++
				} else {
					hotGET++
				}
				continue
			}
			if got := s.Rate / lr; math.Abs(got-tt.coldFactor) > 1e-3 {
				t.Errorf("rate %v: cold stream %s %s at %.4f of its limit, want %.4f", tt.rate, s.Tenant, s.Method, got, tt.coldFactor)
			}
		}
		if hotPUT != 5 || hotGET != tt.hotGETs {
			t.Errorf("rate %v: %d hot PUT and %d hot GET streams, want 5 and %d", tt.rate, hotPUT, hotGET, tt.hotGETs)
		}
		// Pick follows the rates.
		r := rand.New(rand.NewPCG(3, 4))
		counts := make([]int, len(w.Streams))
		const n = 200000
		for range n {
			counts[w.Pick(r)]++
		}
		for i, s := range w.Streams {
			want := n * s.Rate / w.Rate
			if math.Abs(float64(counts[i])-want) > 5*math.Sqrt(want)+5 {
				t.Errorf("rate %v: stream %d picked %d times, want ~%.0f", tt.rate, i, counts[i], want)
			}
		}
	}
	// Enough rate: every hot stream runs hot, cold streams are capped at
	// 80% and the hot ones absorb the rest.
	w, err := BuildWorkload(lim, 25, 5000)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range w.Streams {
		if !s.Hot && math.Abs(s.Rate/s.LimitRate()-coldMax) > 1e-9 {
			t.Errorf("5000 req/s: cold %s %s at %.3f of its limit, want 0.8", s.Tenant, s.Method, s.Rate/s.LimitRate())
		}
	}
	if math.Abs(w.Rate-5000) > 1e-6 {
		t.Errorf("5000 req/s: total %v", w.Rate)
	}
	if _, err := BuildWorkload(lim, 0, 10); err == nil {
		t.Error("0 tenants accepted")
	}
	if _, err := BuildWorkload(lim, 3, 0); err == nil {
		t.Error("rate 0 accepted")
	}
	if got := w.MaxPeriod(); got != 10*time.Second {
		t.Errorf("MaxPeriod %v", got)
	}
}

func TestBuildWorkloadOverridesAndGlobal(t *testing.T) {
	lim, err := httpfilter.Parse("t.yaml", []byte(`
slas:
  - id: get-product
    match:
      methods: [GET]
      pathPattern: /v1/organizations/{orgId}/product/*
    tenant: {fromPath: orgId}
    tiers: [{period: 10, threshold: 1000}, {period: 1, threshold: 50}]
    overrides:
      - tenants: [org-02]
        tiers: [{period: 10, threshold: 5000}]
  - id: all-writes
    match:
      methods: [PUT]
      pathPattern: /v1/**
    tenant: none
    noTenant: shared
    tiers: [{period: 10, threshold: 300}]
`))
	if err != nil {
		t.Fatal(err)
	}
	w, err := BuildWorkload(lim, 4, 400)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]Stream{}
	for _, s := range w.Streams {
		byKey[s.Tenant+" "+s.Method] = s
	}
	if s := byKey["org-01 GET"]; s.LimitRate() != 50 || len(s.SLAs[0].Tiers) != 2 {
		t.Errorf("org-01 GET: limit rate %v, tiers %v (want the 1 s tier: 50/s)", s.LimitRate(), s.SLAs)
	}
	if s := byKey["org-02 GET"]; s.LimitRate() != 500 {
		t.Errorf("org-02 GET: limit rate %v, want its override's 500/s", s.LimitRate())
	}
	if s := byKey["org-03 PUT"]; s.SLAs[0].Tenant != SharedTenant {
		t.Errorf("a global SLA's ground truth is shared, got tenant %q", s.SLAs[0].Tenant)
	}
}

func TestTruthWindows(t *testing.T) {
	tr := NewTruth(2)
	s := &Stream{Tenant: "org-01", Method: "GET", SLAs: []StreamSLA{{ID: "get", Tenant: "org-01", Tiers: []Tier{{10 * time.Second, 3}, {time.Second, 2}}}}}
	base := time.Unix(1_700_000_000, 0) // a multiple of 10 s
	steps := []struct {
		at   time.Duration
		node int
		o    Outcome
	}{
		{100 * time.Millisecond, 0, Admitted},
		{900 * time.Millisecond, 1, Admitted},
		{999 * time.Millisecond, 1, Denied},
		{time.Second, 0, Admitted}, // next 1 s window, same 10 s window
		{9999 * time.Millisecond, 1, Failed},
		{10 * time.Second, 0, Admitted}, // next 10 s window
	}
	for _, st := range steps {
		tr.Record(s, st.node, base.Add(st.at), st.o)
	}
	type row struct {
		period                   time.Duration
		start                    time.Duration
		offered, admitted, n1Adm int64
	}
	var got []row
	for _, w := range tr.Windows(time.Time{}) {
		got = append(got, row{w.Period, time.Duration(w.Start - base.UnixNano()), w.Offered, w.Admitted, w.PerNode[1].Admitted})
	}
	want := []row{
		{time.Second, 0, 3, 2, 1},
		{time.Second, time.Second, 1, 1, 0},
		{time.Second, 9 * time.Second, 1, 0, 0},
		{time.Second, 10 * time.Second, 1, 1, 0},
		{10 * time.Second, 0, 5, 3, 1},
		{10 * time.Second, 10 * time.Second, 1, 1, 0},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("windows\n got %v\nwant %v", got, want)
	}
	total, per := tr.Totals()
	if total != (NodeCounts{Offered: 6, Admitted: 4, Denied: 1, Errors: 1}) || per[1] != (NodeCounts{Offered: 3, Admitted: 1, Denied: 1, Errors: 1}) {
		t.Fatalf("totals %+v, per node %+v", total, per)
	}
	if n := len(tr.Windows(base.Add(10 * time.Second))); n != 2 {
		t.Fatalf("windows ending after +10s: %d, want 2", n)
	}
}

func TestEventLog(t *testing.T) {
	var sb strings.Builder
	l := NewEventLog(3, &sb)
	_, _ = l.Write([]byte("a\nb\nc"))
	if got := l.Last(10); len(got) != 2 || got[0].Text != "a" || got[1].Text != "b" {
		t.Fatalf("Last = %v", got)
	}
	_, _ = l.Write([]byte("\n"))
	l.Add("d")
	l.Add("e")
	var texts []string
	for _, e := range l.Last(10) {
		texts = append(texts, e.Text)
	}
	if !slices.Equal(texts, []string{"c", "d", "e"}) {
		t.Fatalf("ring = %v", texts)
	}
	if sb.String() != "a\nb\nc\nd\ne\n" {
		t.Fatalf("tee got %q", sb.String())
	}
	if got := l.Last(1); len(got) != 1 || got[0].Text != "e" {
		t.Fatalf("Last(1) = %v", got)
	}
}

// TestLineWriters: the node output writer prefixes every complete line, and
// neither it nor the event log holds back more than maxLine bytes of a line
// that never ends.
func TestLineWriters(t *testing.T) {
	var out strings.Builder
	w := &lineWriter{prefix: "n1 | ", w: &out}
	_, _ = w.Write([]byte("a\nb"))
	_, _ = w.Write([]byte("c\n"))
	if out.String() != "n1 | a\nn1 | bc\n" {
		t.Fatalf("prefixed output %q", out.String())
	}
	long := strings.Repeat("x", maxLine+1)
	out.Reset()
	_, _ = w.Write([]byte(long))
	if out.String() != "n1 | "+long+"\n" || len(w.in.buf) != 0 {
		t.Fatalf("unended line: wrote %d bytes, kept %d", out.Len(), len(w.in.buf))
	}
	l := NewEventLog(2, nil)
	_, _ = l.Write([]byte(long))
	if got := l.Last(1); len(got) != 1 || got[0].Text != long || len(l.in.buf) != 0 {
		t.Fatalf("event log kept %d bytes of an unended line, events %d", len(l.in.buf), len(got))
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.LimitsData = []byte("x")
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		mod  func(*Config)
	}{
		{"-nodes", func(c *Config) { c.Nodes = 0 }},
		{"-rate", func(c *Config) { c.Rate = -1 }},
		{"-rate", func(c *Config) { c.Rate = math.NaN() }},
		{"-rate", func(c *Config) { c.Rate = 1e12 }},
		{"-rate", func(c *Config) { c.Rate = MaxRate + 1 }},
		{"-tenants", func(c *Config) { c.Tenants = 0 }},
		{"-duration", func(c *Config) { c.Duration = -time.Second }},
		{"-sync", func(c *Config) { c.SyncInterval = 0 }},
		{"-report", func(c *Config) { c.Report = "xml" }},
		{"-policy", func(c *Config) { c.Policy = "fastest" }},
		{"-http", func(c *Config) { c.Dashboard = "0.0.0.0:8080" }},
		{"-log-level", func(c *Config) { c.LogLevel = "loud" }},
		{"-config", func(c *Config) { c.LimitsData = nil }},
		{"-clients", func(c *Config) { c.Clients = "sticky" }},
		{"-move-every", func(c *Config) { c.MoveEvery = 0 }},
	} {
		c := ok
		tt.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.name) {
			t.Errorf("%s: err %v, want one naming the flag", tt.name, err)
		}
	}
	c := ok
	c.Rate = MaxRate
	if err := c.Validate(); err != nil {
		t.Errorf("-rate %d (MaxRate): %v", MaxRate, err)
	}
}

func TestComplete(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	gs := GenStats{Started: start, Stopped: start.Add(12 * time.Second)}
	p := 10 * time.Second
	for _, tt := range []struct {
		at   time.Duration
		want bool
	}{{-10 * time.Second, false}, {0, true}, {10 * time.Second, false}} {
		if got := complete(gs, start.Add(tt.at), p, start.Add(time.Hour)); got != tt.want {
			t.Errorf("window at %v: complete %v, want %v", tt.at, got, tt.want)
		}
	}
	if complete(GenStats{}, start, p, start.Add(time.Hour)) {
		t.Error("no load: nothing is complete")
	}
	running := GenStats{Started: start}
	if complete(running, start, p, start.Add(9*time.Second)) || !complete(running, start, p, start.Add(10*time.Second)) {
		t.Error("a running load's window is complete once it has ended")
	}
}
