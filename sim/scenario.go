package sim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/ring"
)

// ErrScenario is wrapped by every error ParseScenario returns.
var ErrScenario = errors.New("sim: invalid scenario")

// Scenario is one parsed scenario file: the cluster, the network, the limits,
// the traffic, a timeline of faults and the bounds the results must meet.
// See the package documentation for the file format. A Scenario is a plain
// value once parsed; Run does not modify it, so one Scenario may be run by
// several goroutines at once.
type Scenario struct {
	// Name is the file name without extension; Desc the one-line description.
	Name string
	Desc string
	// Instances is the initial member count: members n0 .. n(Instances-1).
	Instances int
	// Sync is the sync interval of every instance. Default 1 s.
	Sync time.Duration
	// Duration is the simulated run length.
	Duration time.Duration
	// Warmup excludes windows that start before it from the measurement.
	// Default: the longest tier period.
	Warmup time.Duration
	// Net is the network model.
	Net Network
	// Profile names the gossip timing the membership delays model:
	// "local" (gossip.ProfileLocal, the default) or "lan"
	// (gossip.ProfileLAN, node.DefaultConfig's, for production).
	Profile string
	// Detect is how long after a crash or partition members see it
	// (memberlist's failure detection), plus a uniform jitter in
	// [0, DetectJitter) per member. Default: the profile's (local: 700 ms
	// and 300 ms; lan: see Profiles).
	Detect       time.Duration
	DetectJitter time.Duration
	// DetectSide is, from four members on, how long a member left with
	// one, two or three members on its side of a partition or cut (index
	// 0, 1, 2) takes to see it, per member it lost: memberlist starts a
	// suspicion at six times its floor and shortens it as members on the
	// same side confirm it. Until then (if later than Detect) its view
	// keeps the members it lost, and then drops them all at once (the
	// measurements behind it give only when the last went). Default: the
	// profile's (lan only); a detect line clears it.
	DetectSide []time.Duration
	// Heal and HealJitter are the same for a heal, which the members see
	// when gossip's rejoin loop merges the two views. Default: the
	// profile's; a detect line sets them too.
	Heal, HealJitter time.Duration
	// Notify is how long after a join, restart or leave the other members
	// see it (a broadcast, faster than failure detection). Default: the
	// profile's (local: 200 ms).
	Notify time.Duration
	// PendingWait is node.Config.PendingWait: how long a request the lease
	// policy cannot admit yet waits for the owner's answers, a sync being
	// asked for at once. Default 3 x Sync, as in the node; 0 never waits.
	PendingWait time.Duration
	// QuorumTerm and SafeShare are node.Config's for the lease policy's
	// majority rule (the "quorum" directive). Default: the node's.
	QuorumTerm time.Duration
	SafeShare  float64
	// Skew maps member names to clock offsets; SkewRandom, when > 0, gives
	// every member not in Skew an offset drawn uniformly in ±SkewRandom.
	Skew       map[string]time.Duration
	SkewRandom time.Duration
	// MedianClock counts the requests in windows of the members' median
	// clock (the "measure median" directive) rather than of virtual time:
	// the clock every engine reads time on once the members have heard
	// each other (node's clock.go), so that a window measured is one the
	// cluster enforced. The median is of the initial members' offsets.
	MedianClock bool
	// SLAs are the limits; Traffic the load offered.
	SLAs    []SLA
	Traffic []Traffic
	// PlotTenant and PlotSLA name the series the plot draws.
	PlotTenant, PlotSLA string
	// Timeline is the list of faults, sorted by time.
	Timeline []Event
	// Expect holds the golden bounds per policy.
	Expect []Expect
}

// Network is the model of the network between members and to the central
// store. Every message independently takes Latency plus a jitter, and is lost
// with probability Loss; a request is delivered twice with probability Dup.
// Reordering comes from the jitter. The zero value is a perfect network with
// no latency. Like every part of a Scenario, it is a plain value, read-only
// during a run.
type Network struct {
	Latency time.Duration
	// Jitter is the mean of an exponential jitter ("exp", the default) or the
	// median of a lognormal one ("lognormal", with Sigma).
	Jitter     time.Duration
	JitterDist string
	Sigma      float64
	Loss, Dup  float64
}

// SLA is one limit definition: all its tiers apply to every request of every
// tenant that a traffic line sends to it. A plain value; an SLA needs at
// least one tier.
type SLA struct {
	ID    string
	Tiers []Tier
}

// Tier is one tier of an SLA. A plain value.
type Tier struct {
	Algorithm counters.Algorithm
	Period    time.Duration
	Threshold int64
}

// rate returns the SLA's tightest rate in requests per second.
func (s *SLA) rate() float64 {
	r := math.Inf(1)
	for _, t := range s.Tiers {
		r = min(r, float64(t.Threshold)/t.Period.Seconds())
	}
	return r
}

func (s *SLA) longest() time.Duration {
	var p time.Duration
	for _, t := range s.Tiers {
		p = max(p, t.Period)
	}
	return p
}

// Traffic is one traffic line: each tenant gets its own stream of requests.
// A plain value; the parser fills in its defaults (Burst 1, Poisson).
type Traffic struct {
	Tenants []string
	SLA     string
	// Rate is in requests per second per tenant; RampTo, when > 0, makes the
	// rate go linearly from Rate to RampTo between From and To.
	Rate, RampTo float64
	// Burst, in (0, 1], packs each window's traffic (of the SLA's longest
	// period) into the first Burst of the window; 1 means steady.
	Burst float64
	// Spread gives named members a share of the stream; the members not
	// named share the rest evenly. Empty means even.
	Spread []Weight
	// Poisson arrivals, or evenly spaced ones.
	Poisson bool
	// From and To bound the stream in time; To 0 means the end of the run.
	From, To time.Duration
	// Retry makes the clients retry a denied request once, after the
	// Retry-After the denial said (within a minute), at the same instance:
	// Stats counts how many retries are denied again.
	Retry bool
}

// Weight is a member's share of a stream, in [0, 1]. A plain value.
type Weight struct {
	Name  string
	Share float64
}

// Event kinds of the timeline.
const (
	EvPartition = "partition"
	EvHeal      = "heal"
	EvCrash     = "crash"
	EvRestart   = "restart"
	EvJoin      = "join"
	EvLeave     = "leave"
	// EvCut drops every message from the members of Groups[0] to those of
	// Groups[1] (a one-way cut: the other direction still gets through).
	// Failure detection needs round trips, so each side sees the other gone
	// after the detection delay, as with a partition. Heal ends it.
	EvCut = "cut"
)

// Profile is the membership timing of one gossip profile, as the simulator
// models it.
type Profile struct {
	// Detect and DetectJitter: when members see a crash or partition;
	// Heal and HealJitter: when they see a heal (gossip's rejoin loop, every
	// gossip.DefaultRejoinIntervalLAN under lan). Notify: when they see a
	// join, restart or graceful leave.
	Detect, DetectJitter, Heal, HealJitter, Notify time.Duration
	// Side: see Scenario.DetectSide.
	Side []time.Duration
}

// Profiles are the gossip profiles the simulator models, from real
// memberlist clusters on 127.0.0.1 (the gossip package's tests): "local"
// is gossip.ProfileLocal, "lan" gossip.ProfileLAN, node.DefaultConfig's.
// gossip's TestLANPartitionTiming (3 nodes, a 2|1 cut) logs the last member
// noticing the partition after 7.8 s, later than lan's Detect plus its
// jitter, and the views merged 2.0-2.2 s after the heal, the end of lan's
// Heal range (its rejoin ticks fell just after the heal there; a heal at
// another moment waits less). From four members on, a small side of a
// cut notices it late (Scenario.DetectSide), and the later the more
// members it lost: on cuts of 4 to 8 members (one run each, README's
// Simulation section), a member alone took 32.8, 42.8, over 60 and
// 68.6 s to drop 3, 4, 5 and 7 members, a side of two 17.2, 17.2 and
// 39.2 s for 3, 4 and 6, a side of three 9.8 and 21.0 s for 2 and 5,
// while the large side took 5.8-7.8 s, lan's Detect. Side models that as
// 10, 6.5 and 4.2 s per member lost.
var Profiles = map[string]Profile{
	"local": {Detect: 700 * time.Millisecond, DetectJitter: 300 * time.Millisecond, Heal: 700 * time.Millisecond, HealJitter: 300 * time.Millisecond, Notify: 200 * time.Millisecond},
	"lan": {Detect: 5500 * time.Millisecond, DetectJitter: time.Second, Heal: 100 * time.Millisecond, HealJitter: 2 * time.Second, Notify: 400 * time.Millisecond,
		Side: []time.Duration{10 * time.Second, 6500 * time.Millisecond, 4200 * time.Millisecond}},
}

// Event is one fault in the timeline. A plain value.
type Event struct {
	At   time.Duration
	Kind string
	// Name is the member concerned (crash, restart, join, leave).
	Name string
	// Host (crash): the member's host went down with it, so calls to it
	// go unanswered until they time out. Otherwise only its process
	// stopped (a kill, a panic, an OOM kill): its host refuses the calls
	// at once, and the members take it for stopped (node.Engine.Refused).
	Host bool
	// Groups are the sides of a partition; "store" may appear in one (the
	// central store; default: with the first group). For a cut, the
	// senders and the receivers whose messages are dropped.
	Groups [][]string
	// Text is the event as written, for plots.
	Text string
}

// Expect is one "expect" line: the bounds a policy's results must meet,
// and the design targets (lease) that a recorded miss relaxes. A plain
// value.
type Expect struct {
	Policy  Policy
	Bounds  []Bound
	Targets []Bound
	Line    int
}

// Bound is one inequality on a result: metric "overshoot" or "undershoot"
// (percent) or "messages" (count), op "<=" or ">=". A plain value.
type Bound struct {
	Metric string
	Op     string
	Value  float64
}

func (b Bound) String() string {
	if b.Metric == "messages" {
		return fmt.Sprintf("%s%s%g", b.Metric, b.Op, b.Value)
	}
	return fmt.Sprintf("%s%s%g%%", b.Metric, b.Op, b.Value)
}

// ParseScenario parses a scenario file. name is used in errors and as the
// scenario's Name.
func ParseScenario(name string, src []byte) (*Scenario, error) {
	local := Profiles["local"]
	sc := &Scenario{
		Name:         name,
		Sync:         time.Second,
		Profile:      "local",
		Detect:       local.Detect,
		DetectJitter: local.DetectJitter,
		Heal:         local.Heal,
		HealJitter:   local.HealJitter,
		Notify:       local.Notify,
		PendingWait:  -1,
		Net:          Network{Latency: time.Millisecond, Jitter: 500 * time.Microsecond, JitterDist: "exp"},
		Skew:         map[string]time.Duration{},
		Warmup:       -1,
	}
	p := parser{sc: sc, name: name}
	s := bufio.NewScanner(bytes.NewReader(src))
	for s.Scan() {
		p.line++
		text := s.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		if err := p.directive(f); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %s: %v", ErrScenario, name, p.line, f[0], err)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrScenario, name, err)
	}
	if err := p.finish(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrScenario, name, err)
	}
	return sc, nil
}

type parser struct {
	sc   *Scenario
	name string
	line int
}

func (p *parser) directive(f []string) error {
	sc := p.sc
	args := f[1:]
	switch f[0] {
	case "desc":
		sc.Desc = strings.Join(args, " ")
	case "instances":
		n, err := oneInt(args)
		if err != nil || n < 1 || n > 1000 {
			return fmt.Errorf("want a count in 1..1000")
		}
		sc.Instances = n
	case "sync":
		return setDur(&sc.Sync, args, true)
	case "duration":
		return setDur(&sc.Duration, args, true)
	case "warmup":
		return setDur(&sc.Warmup, args, false)
	case "network":
		return p.network(args)
	case "detect":
		if len(args) < 1 {
			return fmt.Errorf("want a duration")
		}
		d, err := time.ParseDuration(args[0])
		if err != nil || d < 0 {
			return fmt.Errorf("want a duration >= 0")
		}
		sc.Detect, sc.Heal, sc.DetectSide = d, d, nil
		for _, kv := range args[1:] {
			k, v, _ := strings.Cut(kv, "=")
			j, err := time.ParseDuration(v)
			if k != "jitter" || err != nil || j < 0 {
				return fmt.Errorf("unknown option %q (want jitter=DURATION)", kv)
			}
			sc.DetectJitter, sc.HealJitter = j, j
		}
	case "notify":
		return setDur(&sc.Notify, args, false)
	case "profile":
		pr, ok := Profiles[strings.Join(args, " ")]
		if len(args) != 1 || !ok {
			return fmt.Errorf("want local or lan")
		}
		sc.Profile, sc.Detect, sc.DetectJitter, sc.Notify = args[0], pr.Detect, pr.DetectJitter, pr.Notify
		sc.DetectSide = pr.Side
		sc.Heal, sc.HealJitter = pr.Heal, pr.HealJitter
	case "pending":
		return setDur(&sc.PendingWait, args, false)
	case "skew":
		if len(args) != 2 {
			return fmt.Errorf("want NAME OFFSET or random MAX")
		}
		d, err := time.ParseDuration(args[1])
		if err != nil {
			return err
		}
		if args[0] == "random" {
			if d < 0 {
				return fmt.Errorf("max must be >= 0")
			}
			sc.SkewRandom = d
		} else {
			sc.Skew[args[0]] = d
		}
	case "measure":
		switch {
		case len(args) == 1 && args[0] == "median":
			sc.MedianClock = true
		case len(args) == 1 && args[0] == "real":
			sc.MedianClock = false
		default:
			return fmt.Errorf("want median or real")
		}
	case "quorum":
		return p.quorum(args)
	case "sla":
		return p.sla(args)
	case "traffic":
		return p.traffic(args)
	case "plot":
		if len(args) != 2 {
			return fmt.Errorf("want TENANT SLA")
		}
		sc.PlotTenant, sc.PlotSLA = args[0], args[1]
	case "at":
		return p.at(args)
	case "expect":
		return p.expect(args)
	default:
		return fmt.Errorf("unknown directive")
	}
	return nil
}

// quorum term=DURATION safe=FRACTION
func (p *parser) quorum(args []string) error {
	for _, kv := range args {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("want key=value, got %q", kv)
		}
		switch k {
		case "term":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("term: want a duration > 0, got %q", v)
			}
			p.sc.QuorumTerm = d
		case "safe":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 0 && f <= 1) {
				return fmt.Errorf("safe: want a fraction in [0, 1], got %q", v)
			}
			p.sc.SafeShare = f
		default:
			return fmt.Errorf("unknown quorum setting %q (want term or safe)", k)
		}
	}
	return nil
}

func (p *parser) network(args []string) error {
	n := &p.sc.Net
	for _, kv := range args {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("want key=value, got %q", kv)
		}
		var err error
		switch k {
		case "latency":
			n.Latency, err = time.ParseDuration(v)
			if err == nil && n.Latency < 0 {
				err = fmt.Errorf("negative")
			}
		case "jitter":
			// exp:MEAN, lognormal:MEDIAN:SIGMA, or a bare duration (exp).
			parts := strings.Split(v, ":")
			dist := "exp"
			if len(parts) > 1 {
				dist, parts = parts[0], parts[1:]
			}
			switch {
			case dist == "exp" && len(parts) == 1:
			case dist == "lognormal" && len(parts) == 2:
				n.Sigma, err = strconv.ParseFloat(parts[1], 64)
				if err == nil && (n.Sigma < 0 || n.Sigma > 5) {
					err = fmt.Errorf("sigma out of range 0..5")
				}
			default:
				err = fmt.Errorf("want exp:MEAN or lognormal:MEDIAN:SIGMA")
			}
			if err == nil {
				n.JitterDist = dist
				n.Jitter, err = time.ParseDuration(parts[0])
				if err == nil && n.Jitter < 0 {
					err = fmt.Errorf("negative")
				}
			}
		case "loss":
			n.Loss, err = prob(v)
		case "dup":
			n.Dup, err = prob(v)
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			return fmt.Errorf("%s: %v", kv, err)
		}
	}
	return nil
}

// sla ID ALG:PERIOD:THRESHOLD...
func (p *parser) sla(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("want ID and at least one ALG:PERIOD:THRESHOLD tier")
	}
	s := SLA{ID: args[0]}
	for _, a := range p.sc.SLAs {
		if a.ID == s.ID {
			return fmt.Errorf("duplicate SLA %q", s.ID)
		}
	}
	for _, t := range args[1:] {
		parts := strings.Split(t, ":")
		if len(parts) != 3 {
			return fmt.Errorf("tier %q: want ALG:PERIOD:THRESHOLD", t)
		}
		alg, err := counters.ParseAlgorithm(parts[0])
		if err != nil {
			return fmt.Errorf("tier %q: %v", t, err)
		}
		per, err := time.ParseDuration(parts[1])
		if err != nil || per <= 0 || time.Hour%per != 0 {
			return fmt.Errorf("tier %q: period must divide 1h", t)
		}
		th, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil || th < 1 || th > 1e12 {
			return fmt.Errorf("tier %q: threshold must be in 1..1e12", t)
		}
		for _, o := range s.Tiers {
			if o.Period == per {
				return fmt.Errorf("tier %q: two tiers with period %v", t, per)
			}
		}
		s.Tiers = append(s.Tiers, Tier{Algorithm: alg, Period: per, Threshold: th})
	}
	p.sc.SLAs = append(p.sc.SLAs, s)
	return nil
}

func (p *parser) traffic(args []string) error {
	tr := Traffic{Burst: 1, Poisson: true}
	var rate, ramp string
	for _, kv := range args {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("want key=value, got %q", kv)
		}
		var err error
		switch k {
		case "tenants":
			tr.Tenants, err = tenants(v)
		case "sla":
			tr.SLA = v
		case "rate":
			rate = v
		case "ramp":
			ramp = v
		case "burst":
			tr.Burst, err = prob(v)
			if err == nil && tr.Burst == 0 {
				err = fmt.Errorf("must be > 0")
			}
		case "spread":
			tr.Spread, err = spread(v)
		case "arrivals":
			switch v {
			case "poisson":
				tr.Poisson = true
			case "even":
				tr.Poisson = false
			default:
				err = fmt.Errorf("want poisson or even")
			}
		case "retry":
			if v != "once" {
				err = fmt.Errorf("want once")
			}
			tr.Retry = true
		case "from":
			tr.From, err = time.ParseDuration(v)
		case "to":
			tr.To, err = time.ParseDuration(v)
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			return fmt.Errorf("%s: %v", kv, err)
		}
	}
	if len(tr.Tenants) == 0 || tr.SLA == "" {
		return fmt.Errorf("tenants= and sla= are required")
	}
	var sla *SLA
	for i := range p.sc.SLAs {
		if p.sc.SLAs[i].ID == tr.SLA {
			sla = &p.sc.SLAs[i]
		}
	}
	if sla == nil {
		return fmt.Errorf("unknown SLA %q (declare it with sla before traffic)", tr.SLA)
	}
	if (rate == "") == (ramp == "") {
		return fmt.Errorf("want exactly one of rate= and ramp=")
	}
	var err error
	if rate != "" {
		tr.Rate, err = parseRate(rate, sla)
		if err != nil {
			return fmt.Errorf("rate=%s: %v", rate, err)
		}
	} else {
		a, b, ok := strings.Cut(ramp, "..")
		if !ok {
			return fmt.Errorf("ramp=%s: want A..B", ramp)
		}
		if tr.Rate, err = parseRate(a, sla); err == nil {
			tr.RampTo, err = parseRate(b, sla)
		}
		if err == nil && tr.RampTo == 0 {
			err = fmt.Errorf("ramp end must be > 0")
		}
		if err != nil {
			return fmt.Errorf("ramp=%s: %v", ramp, err)
		}
	}
	if tr.From < 0 || tr.To < 0 || (tr.To > 0 && tr.To <= tr.From) {
		return fmt.Errorf("want 0 <= from < to")
	}
	p.sc.Traffic = append(p.sc.Traffic, tr)
	return nil
}

// parseRate reads "2x" (times the SLA's tightest rate) or "150/s".
func parseRate(v string, sla *SLA) (float64, error) {
	var r float64
	var err error
	switch {
	case strings.HasSuffix(v, "x"):
		r, err = strconv.ParseFloat(strings.TrimSuffix(v, "x"), 64)
		r *= sla.rate()
	case strings.HasSuffix(v, "/s"):
		r, err = strconv.ParseFloat(strings.TrimSuffix(v, "/s"), 64)
	default:
		return 0, fmt.Errorf("want Nx or N/s")
	}
	if err != nil || r < 0 || r > 1e7 || math.IsNaN(r) {
		return 0, fmt.Errorf("want a rate in 0..1e7/s")
	}
	return r, nil
}

// tenants reads "a,b,c" and "cold[1-20]".
func tenants(v string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(v, ",") {
		if t == "" {
			return nil, fmt.Errorf("empty tenant")
		}
		i := strings.IndexByte(t, '[')
		if i < 0 {
			out = append(out, t)
			continue
		}
		if !strings.HasSuffix(t, "]") {
			return nil, fmt.Errorf("%q: want PREFIX[A-B]", t)
		}
		a, b, ok := strings.Cut(t[i+1:len(t)-1], "-")
		lo, err1 := strconv.Atoi(a)
		hi, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || lo > hi || hi-lo >= 10000 {
			return nil, fmt.Errorf("%q: want PREFIX[A-B] with A <= B and fewer than 10000", t)
		}
		for n := lo; n <= hi; n++ {
			out = append(out, t[:i]+strconv.Itoa(n))
		}
	}
	return out, nil
}

// spread reads "even" or "n0:90%,n1:5%".
func spread(v string) ([]Weight, error) {
	if v == "even" {
		return nil, nil
	}
	var out []Weight
	var sum float64
	for _, part := range strings.Split(v, ",") {
		name, pct, ok := strings.Cut(part, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("want even or NAME:PCT%%[,NAME:PCT%%]")
		}
		s, err := prob(pct)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", part, err)
		}
		sum += s
		out = append(out, Weight{Name: name, Share: s})
	}
	if sum > 1+1e-9 {
		return nil, fmt.Errorf("shares add up to more than 100%%")
	}
	return out, nil
}

func (p *parser) at(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("want TIME EVENT")
	}
	at, err := time.ParseDuration(args[0])
	if err != nil || at < 0 {
		return fmt.Errorf("want a time >= 0")
	}
	ev := Event{At: at, Kind: args[1], Text: strings.Join(args[1:], " ")}
	rest := args[2:]
	switch ev.Kind {
	case EvHeal:
		if len(rest) != 0 {
			return fmt.Errorf("heal takes no argument")
		}
	case "isolate":
		if len(rest) != 1 {
			return fmt.Errorf("want isolate NAME")
		}
		ev.Kind = EvPartition
		ev.Groups = [][]string{nil, {rest[0]}} // nil: everyone else
	case EvPartition:
		var g []string
		for _, a := range strings.Fields(strings.Join(rest, " ")) {
			if a == "|" {
				ev.Groups = append(ev.Groups, g)
				g = nil
				continue
			}
			for _, n := range strings.Split(a, ",") {
				if n != "" {
					g = append(g, n)
				}
			}
		}
		ev.Groups = append(ev.Groups, g)
		if len(ev.Groups) < 2 || slices.ContainsFunc(ev.Groups, func(g []string) bool { return len(g) == 0 }) {
			return fmt.Errorf("want at least two non-empty groups: A,B | C")
		}
	case EvCut:
		from, to, ok := strings.Cut(strings.Join(rest, " "), "->")
		split := func(s string) []string {
			var out []string
			for _, n := range strings.Split(strings.ReplaceAll(s, " ", ""), ",") {
				if n != "" {
					out = append(out, n)
				}
			}
			return out
		}
		ev.Groups = [][]string{split(from), split(to)}
		if !ok || len(ev.Groups[0]) == 0 || len(ev.Groups[1]) == 0 {
			return fmt.Errorf("want cut A,B -> C (messages from A and B to C are dropped)")
		}
	case EvCrash:
		if len(rest) == 2 && rest[1] == "host" {
			ev.Host, rest = true, rest[:1]
		}
		if len(rest) != 1 {
			return fmt.Errorf("want crash NAME [host]")
		}
		ev.Name = rest[0]
	case EvRestart, EvJoin, EvLeave:
		if len(rest) != 1 {
			return fmt.Errorf("want %s NAME", ev.Kind)
		}
		ev.Name = rest[0]
	default:
		return fmt.Errorf("unknown event %q (want partition, isolate, cut, heal, crash, restart, join, leave)", ev.Kind)
	}
	p.sc.Timeline = append(p.sc.Timeline, ev)
	return nil
}

// expect POLICY BOUND... [target:BOUND...]
func (p *parser) expect(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("want POLICY and bounds")
	}
	pol, err := ParsePolicy(args[0])
	if err != nil {
		return err
	}
	e := Expect{Policy: pol, Line: p.line}
	for _, a := range args[1:] {
		target := strings.HasPrefix(a, "target:")
		b, err := parseBound(strings.TrimPrefix(a, "target:"))
		if err != nil {
			return fmt.Errorf("%q: %v", a, err)
		}
		if target {
			e.Targets = append(e.Targets, b)
		} else {
			e.Bounds = append(e.Bounds, b)
		}
	}
	p.sc.Expect = append(p.sc.Expect, e)
	return nil
}

func parseBound(s string) (Bound, error) {
	for _, op := range []string{"<=", ">="} {
		m, v, ok := strings.Cut(s, op)
		if !ok {
			continue
		}
		b := Bound{Metric: m, Op: op}
		switch m {
		case "overshoot", "undershoot", "falsedeny":
			if !strings.HasSuffix(v, "%") {
				return b, fmt.Errorf("want a percentage")
			}
			v = strings.TrimSuffix(v, "%")
		case "messages":
		default:
			return b, fmt.Errorf("unknown metric %q (want overshoot, undershoot, falsedeny, messages)", m)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return b, fmt.Errorf("want a number >= 0")
		}
		b.Value = f
		return b, nil
	}
	return Bound{}, fmt.Errorf("want METRIC<=VALUE or METRIC>=VALUE")
}

// finish checks the whole scenario and resolves owner:TENANT/SLA names.
func (p *parser) finish() error {
	sc := p.sc
	switch {
	case sc.Desc == "":
		return fmt.Errorf("desc is required")
	case sc.Instances == 0:
		return fmt.Errorf("instances is required")
	case sc.Duration == 0:
		return fmt.Errorf("duration is required")
	case len(sc.Traffic) == 0:
		return fmt.Errorf("at least one traffic line is required")
	}
	var longest time.Duration
	for _, s := range sc.SLAs {
		longest = max(longest, s.longest())
	}
	if sc.Warmup < 0 {
		sc.Warmup = longest
	}
	if sc.PendingWait < 0 {
		sc.PendingWait = 3 * sc.Sync
	}
	if sc.PlotTenant == "" {
		sc.PlotTenant, sc.PlotSLA = sc.Traffic[0].Tenants[0], sc.Traffic[0].SLA
	}
	names := map[string]bool{}
	for i := 0; i < sc.Instances; i++ {
		names[memberName(i)] = true
	}
	initial := make([]string, 0, sc.Instances)
	for i := 0; i < sc.Instances; i++ {
		initial = append(initial, memberName(i))
	}
	resolve := func(n string) (string, error) {
		if !strings.HasPrefix(n, "owner:") {
			return n, nil
		}
		return p.owner(strings.TrimPrefix(n, "owner:"), initial)
	}
	slices.SortStableFunc(sc.Timeline, func(a, b Event) int { return int(a.At - b.At) })
	for i := range sc.Timeline {
		ev := &sc.Timeline[i]
		text := ev.Text
		name := func(n string) (string, error) {
			r, err := resolve(n)
			if err != nil {
				return "", fmt.Errorf("at %v %s: %v", ev.At, text, err)
			}
			if r != n { // say who it is in plots
				ev.Text = strings.Replace(ev.Text, n, r+" (owner of "+strings.TrimPrefix(n, "owner:")+")", 1)
			}
			return r, nil
		}
		var err error
		if ev.Name, err = name(ev.Name); err != nil {
			return err
		}
		for _, g := range ev.Groups {
			for j := range g {
				if g[j], err = name(g[j]); err != nil {
					return err
				}
			}
		}
		if ev.Kind == EvJoin {
			if names[ev.Name] {
				return fmt.Errorf("at %v: join %s: already a member", ev.At, ev.Name)
			}
			names[ev.Name] = true
		}
		if ev.At > sc.Duration {
			return fmt.Errorf("at %v: after the end of the run (%v)", ev.At, sc.Duration)
		}
	}
	check := func(n string) error {
		if n != "" && n != "store" && !names[n] {
			return fmt.Errorf("unknown member %q", n)
		}
		return nil
	}
	for _, ev := range sc.Timeline {
		if ev.Kind != EvJoin {
			if err := check(ev.Name); err != nil {
				return fmt.Errorf("at %v %s: %v", ev.At, ev.Text, err)
			}
		}
		for _, g := range ev.Groups {
			for _, n := range g {
				if err := check(n); err != nil {
					return fmt.Errorf("at %v %s: %v", ev.At, ev.Text, err)
				}
			}
		}
	}
	for n := range sc.Skew {
		if err := check(n); err != nil {
			return fmt.Errorf("skew: %v", err)
		}
	}
	for _, tr := range sc.Traffic {
		for i, w := range tr.Spread {
			if err := check(w.Name); err != nil {
				return fmt.Errorf("traffic spread: %v", err)
			}
			if slices.ContainsFunc(tr.Spread[:i], func(o Weight) bool { return o.Name == w.Name }) {
				return fmt.Errorf("traffic spread: %s named twice", w.Name)
			}
		}
	}
	if len(sc.Timeline) > 0 && sc.Timeline[len(sc.Timeline)-1].At > sc.Duration {
		return fmt.Errorf("timeline goes past the duration")
	}
	return nil
}

// owner resolves "TENANT/SLA" to the member that owns the tenant's first
// tier of the SLA on the initial ring.
func (p *parser) owner(ref string, members []string) (string, error) {
	tenant, slaID, ok := strings.Cut(ref, "/")
	if !ok {
		return "", fmt.Errorf("owner:%s: want owner:TENANT/SLA", ref)
	}
	for _, s := range p.sc.SLAs {
		if s.ID != slaID {
			continue
		}
		rg, err := ring.New(ring.DefaultConfig())
		if err != nil {
			return "", err
		}
		rg.Set(members)
		t := s.Tiers[0]
		o, _ := rg.Owner(counters.SeriesHash(tenant, s.ID, method, t.Period))
		return o, nil
	}
	return "", fmt.Errorf("owner:%s: unknown SLA %q", ref, slaID)
}

// method is the HTTP method every simulated request uses.
const method = "GET"

func memberName(i int) string { return "n" + strconv.Itoa(i) }

func oneInt(args []string) (int, error) {
	if len(args) != 1 {
		return 0, fmt.Errorf("want one value")
	}
	return strconv.Atoi(args[0])
}

// setDur sets *dst from a directive's single duration argument, which must
// be positive, or just not negative.
func setDur(dst *time.Duration, args []string, positive bool) error {
	d, err := oneDur(args)
	switch {
	case positive && (err != nil || d <= 0):
		return fmt.Errorf("want a positive duration")
	case err != nil || d < 0:
		return fmt.Errorf("want a duration >= 0")
	}
	*dst = d
	return nil
}

func oneDur(args []string) (time.Duration, error) {
	if len(args) != 1 {
		return 0, fmt.Errorf("want one value")
	}
	return time.ParseDuration(args[0])
}

// prob reads "5%" or "0.05" as a probability in [0, 1].
func prob(v string) (float64, error) {
	scale := 1.0
	if strings.HasSuffix(v, "%") {
		v, scale = strings.TrimSuffix(v, "%"), 0.01
	}
	f, err := strconv.ParseFloat(v, 64)
	f *= scale
	if err != nil || f < 0 || f > 1 || math.IsNaN(f) {
		return 0, fmt.Errorf("want a probability in 0..1 or 0%%..100%%")
	}
	return f, nil
}
