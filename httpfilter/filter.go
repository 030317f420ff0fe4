package httpfilter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/prometheus/client_golang/prometheus"
)

// SharedTenant is the tenant under which requests without a tenant are
// counted when their SLA says noTenant: shared, and every request of an SLA
// with tenant: none (a global limit). It starts with a NUL byte, a control
// character, which no tenant a request supplies may hold (see
// [MaxTenantLen]), so no real tenant can share its counters. Overrides
// never apply to it.
const SharedTenant = "\x00shared"

// MaxTenantLen is the longest tenant, in bytes, that the filter accepts
// from a request (path variable, header, metadata or func). The filter
// refuses a request whose tenant is longer, is not valid UTF-8 or holds a
// control character (C0, DEL or C1, NUL included) — HTTP 400, gRPC
// InvalidArgument — before anything is counted: such a key could not cross
// the peer protocol (its tenant is a proto3 string), and a client must not
// make the counter table hold huge keys. It is the bound the limits file
// puts on override tenants.
const MaxTenantLen = maxTenantLen

// maxMatches is the number of matching SLAs a request is decided with
// without allocating; more still work.
const maxMatches = 8

// HTTPTenantFunc returns the tenant of an HTTP request, for SLAs whose tenant
// source is {func: name}. ok=false means the request has no tenant (the
// SLA's noTenant policy applies). It is called on every matching request,
// concurrently: it must be safe for concurrent use and fast.
type HTTPTenantFunc func(r *http.Request) (tenant string, ok bool)

// GRPCTenantFunc is [HTTPTenantFunc] for gRPC SLAs: it gets the call's context
// (with its incoming metadata and peer) and full method name.
type GRPCTenantFunc func(ctx context.Context, fullMethod string) (tenant string, ok bool)

// FilterOption configures a [Filter] (see [New]). Options are values with
// no state of their own; reuse them freely. (The name Option is taken by
// the limits loader's options.)
type FilterOption func(*filterConfig)

type filterConfig struct {
	httpFuncs  map[string]HTTPTenantFunc
	grpcFuncs  map[string]GRPCTenantFunc
	reg        prometheus.Registerer
	log        *slog.Logger
	clock      func() time.Time
	failClosed bool
	errs       []error
}

// WithTenantFunc registers fn as the tenant func name for HTTP SLAs
// ({func: name} in the limits file). Every func an enabled HTTP SLA names
// must be registered, or [New] fails (and a reload that names an unknown
// func is not enforced: see [Filter]).
func WithTenantFunc(name string, fn HTTPTenantFunc) FilterOption {
	return func(c *filterConfig) {
		switch {
		case name == "" || fn == nil:
			c.errs = append(c.errs, fmt.Errorf("httpfilter: WithTenantFunc(%q): empty name or nil func", name))
		case c.httpFuncs[name] != nil:
			c.errs = append(c.errs, fmt.Errorf("httpfilter: WithTenantFunc(%q): registered twice", name))
		default:
			if c.httpFuncs == nil {
				c.httpFuncs = map[string]HTTPTenantFunc{}
			}
			c.httpFuncs[name] = fn
		}
	}
}

// WithGRPCTenantFunc registers fn as the tenant func name for gRPC SLAs.
// An HTTP and a gRPC func may share a name (one per protocol).
func WithGRPCTenantFunc(name string, fn GRPCTenantFunc) FilterOption {
	return func(c *filterConfig) {
		switch {
		case name == "" || fn == nil:
			c.errs = append(c.errs, fmt.Errorf("httpfilter: WithGRPCTenantFunc(%q): empty name or nil func", name))
		case c.grpcFuncs[name] != nil:
			c.errs = append(c.errs, fmt.Errorf("httpfilter: WithGRPCTenantFunc(%q): registered twice", name))
		default:
			if c.grpcFuncs == nil {
				c.grpcFuncs = map[string]GRPCTenantFunc{}
			}
			c.grpcFuncs[name] = fn
		}
	}
}

// WithRegistry registers the filter's metrics with reg (for a node, pass
// node.Registry()). Default: no metrics are exported (they are still
// counted, in unregistered collectors). Registering two filters with one
// registry fails in [New]: the series would collide.
//
// Series: peerlimit_filter_decisions_total{protocol,sla,result} with result
// allowed, denied, no_tenant, invalid_tenant or error; peerlimit_filter_shadow_would_deny_total{protocol,sla};
// peerlimit_filter_limits_compiled_total{result}.
func WithRegistry(reg prometheus.Registerer) FilterOption {
	return func(c *filterConfig) { c.reg = reg }
}

// WithLogger sets the logger for limits changes and limiter errors (errors
// are logged at most once per second). Denials are logged at Debug level.
// Default: discard.
func WithLogger(l *slog.Logger) FilterOption {
	return func(c *filterConfig) { c.log = l }
}

// WithClock sets the clock the filter passes to a [TimedLimiter] (such as
// [Local]). Default time.Now. It has no effect on other limiters: a
// *node.Node reads its own Config.Clock.
func WithClock(now func() time.Time) FilterOption {
	return func(c *filterConfig) { c.clock = now }
}

// WithFailClosed says what to do when the limiter returns an error (which
// for the limiters of this module only happens when a request matches more
// than counters.MaxLimits tiers in total): false (the default) serves the
// request without rate-limit headers — failing open, like a limiter that
// cannot be reached; true refuses it with 503 (gRPC: Unavailable). Either
// way the error is counted (result="error") and logged.
func WithFailClosed(closed bool) FilterOption {
	return func(c *filterConfig) { c.failClosed = closed }
}

// Filter enforces a limits file on HTTP requests ([Filter.Middleware]) and
// gRPC calls ([Filter.UnaryServerInterceptor],
// [Filter.StreamServerInterceptor]).
//
// Per request it finds every enabled SLA that matches, resolves each one's
// tenant, and makes ONE Take on the limiter with every tier of every
// matching (non-shadow) SLA — the tenant's override tiers where it has one —
// so the tiers of all of them are charged together or not at all. A
// request matching nothing passes untouched, without headers.
//
// Cost: each SLA's tiers are charged that SLA's cost (the limits carry it
// as their Weight), all in the same Take, so a request matching an SLA of
// cost 10 and one of cost 1 charges 10 to the first and 1 to the second.
//
// Shadow SLAs are counted in a second Take of their own (their own
// counters, so they never change what the enforcing SLAs decide), made only
// for requests the enforcing SLAs admitted — the requests a shadow SLA
// would see if it were enforced. A shadow denial only increments
// peerlimit_filter_shadow_would_deny_total. A shadow SLA without a tenant is
// skipped, never rejected. Rate-limit headers describe the enforcing SLAs;
// they describe the shadow SLAs only when no enforcing SLA matches.
//
// Missing tenant (none supplied, or an empty one): with noTenant: reject
// the request gets 400 (gRPC InvalidArgument) and nothing is charged; with
// noTenant: shared it is counted as tenant [SharedTenant]. A tenant that
// cannot be counted (see [MaxTenantLen]: too long, not UTF-8, a control
// character) is refused with 400 (gRPC InvalidArgument) whatever noTenant
// says, before anything is charged; a shadow SLA skips it instead.
//
// Reloads: the filter asks its [LimitsSource] for the limits on every
// request, and prepares each new *Limits once (counter templates, header
// strings, metrics). Counter keys do not depend on thresholds, so an SLA
// whose match is unchanged keeps its counts across a reload. If new limits
// name a tenant func that is not registered, the filter keeps enforcing the
// previous limits and logs the error.
//
// Create it with [New]; the zero value is not usable. It is safe for
// concurrent use.
type Filter struct {
	lim        Limiter
	timed      TimedLimiter // lim, if it takes the time
	src        LimitsSource
	clock      func() time.Time
	log        *slog.Logger
	m          *metrics
	failClosed bool
	httpFuncs  map[string]HTTPTenantFunc
	grpcFuncs  map[string]GRPCTenantFunc
	redirect   *http.ServeMux // empty: writes ServeMux's redirect to a clean path

	cur       atomic.Pointer[compiled]
	compileMu sync.Mutex
	lastLog   atomic.Int64 // unix ns of the last error logged
	pool      sync.Pool    // *scratch
}

// New returns a filter deciding with limiter over the limits of src (a
// *Reloader, or a *Limits for static limits). It fails if an option is
// invalid, if an enabled SLA names a tenant func that is not registered
// for its protocol, or if the metrics cannot be registered.
func New(limiter Limiter, src LimitsSource, opts ...FilterOption) (*Filter, error) {
	if limiter == nil || src == nil {
		return nil, errors.New("httpfilter: New: nil limiter or limits source")
	}
	var cfg filterConfig
	for _, o := range opts {
		o(&cfg)
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, err
	}
	l := src.Limits()
	if l == nil {
		return nil, errors.New("httpfilter: New: the limits source returned nil")
	}
	f := &Filter{
		lim:        limiter,
		src:        src,
		clock:      cfg.clock,
		log:        cfg.log,
		failClosed: cfg.failClosed,
		httpFuncs:  cfg.httpFuncs,
		grpcFuncs:  cfg.grpcFuncs,
		redirect:   http.NewServeMux(),
	}
	f.timed, _ = limiter.(TimedLimiter)
	if f.clock == nil {
		f.clock = time.Now
	}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	f.log = f.log.With("component", "httpfilter")
	f.pool.New = func() any { return new(scratch) }
	m, err := newMetrics(cfg.reg)
	if err != nil {
		return nil, err
	}
	f.m = m
	c, err := f.compile(l)
	if err != nil {
		return nil, err
	}
	f.cur.Store(c)
	m.reloads.WithLabelValues("ok").Inc()
	return f, nil
}

// Limits returns the limits the filter enforces now: the source's, unless
// they could not be used (see [Filter]).
func (f *Filter) Limits() *Limits { return f.current().lim }

// current returns the prepared form of the source's limits, preparing them
// on first use.
func (f *Filter) current() *compiled {
	l := f.src.Limits()
	if c := f.cur.Load(); c.src == l {
		return c
	}
	return f.recompile(l)
}

func (f *Filter) recompile(l *Limits) *compiled {
	f.compileMu.Lock()
	defer f.compileMu.Unlock()
	old := f.cur.Load()
	if old.src == l {
		return old
	}
	c, err := f.compile(l)
	if err != nil {
		f.m.reloads.WithLabelValues("rejected").Inc()
		f.log.Error("new limits cannot be enforced, keeping the previous ones", "source", l.Source, "err", err)
		kept := *old
		kept.src = l // do not try again until the source changes
		c = &kept
	} else {
		f.m.reloads.WithLabelValues("ok").Inc()
		f.log.Info("enforcing new limits", "source", l.Source, "slas", len(l.SLAs))
	}
	f.cur.Store(c)
	return c
}

// compiled is one *Limits prepared for the filter.
type compiled struct {
	src     *Limits        // what the source returned
	lim     *Limits        // what is enforced: src, or older limits if src was rejected
	slas    []*compiledSLA // by position in lim.SLAs; nil for disabled SLAs
	hasHTTP bool
	hasGRPC bool
}

// compiledSLA is one enabled SLA ready for requests.
type compiledSLA struct {
	sla       *SLA
	base      *tierSet
	overrides map[string]*tierSet // nil without overrides
	httpFunc  HTTPTenantFunc
	grpcFunc  GRPCTenantFunc
	m         slaMetrics
}

// tierSet is one list of tiers of an SLA (its own or an override) with
// everything a response needs precomputed.
type tierSet struct {
	limits   []counters.Limit // prepared templates, Tenant empty
	names    []string         // RateLimit policy names
	limitStr []string         // thresholds, formatted
	rlPrefix []string         // `"name";r=`
	policy   string           // the RateLimit-Policy items of every tier
	periods  []time.Duration
	pnames   []string // periodName of each period
}

func (f *Filter) compile(l *Limits) (*compiled, error) {
	c := &compiled{src: l, lim: l, slas: make([]*compiledSLA, len(l.SLAs))}
	var errs []error
	for i := range l.SLAs {
		s := &l.SLAs[i]
		if !s.Enabled {
			continue
		}
		if s.index != i {
			return nil, fmt.Errorf("httpfilter: limits %s: SLA %q is at position %d but indexed %d (limits not built by Parse?)", l.Source, s.ID, i, s.index)
		}
		cs := &compiledSLA{sla: s, base: newTierSet(s, s.Tiers)}
		proto := "http"
		if s.IsGRPC() {
			proto = "grpc"
			c.hasGRPC = true
		} else {
			c.hasHTTP = true
		}
		if s.Tenant.Kind == TenantFunc {
			name := s.Tenant.Name
			if s.IsGRPC() {
				cs.grpcFunc = f.grpcFuncs[name]
			} else {
				cs.httpFunc = f.httpFuncs[name]
			}
			if cs.grpcFunc == nil && cs.httpFunc == nil {
				opt := "WithTenantFunc"
				if s.IsGRPC() {
					opt = "WithGRPCTenantFunc"
				}
				errs = append(errs, &FieldError{File: l.Source, Line: s.Tenant.Line, SLA: s.ID, SLAIndex: i, Field: "tenant.func",
					Msg: fmt.Sprintf("no %s tenant func %q registered (httpfilter.%s)", proto, name, opt)})
			}
		}
		if len(s.Overrides) > 0 {
			cs.overrides = make(map[string]*tierSet, len(s.Overrides))
			shared := map[*Tier]*tierSet{} // tenants of one override entry share its tiers
			for tenant, tiers := range s.Overrides {
				if len(tiers) == 0 {
					continue
				}
				ts := shared[&tiers[0]]
				if ts == nil {
					ts = newTierSet(s, tiers)
					shared[&tiers[0]] = ts
				}
				cs.overrides[tenant] = ts
			}
		}
		cs.m = f.m.forSLA(proto, s.ID)
		c.slas[i] = cs
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

func newTierSet(s *SLA, tiers []Tier) *tierSet {
	n := len(tiers)
	ts := &tierSet{
		limits:   make([]counters.Limit, n),
		names:    make([]string, n),
		limitStr: make([]string, n),
		rlPrefix: make([]string, n),
		periods:  make([]time.Duration, n),
		pnames:   make([]string, n),
	}
	var policy []byte
	for i, t := range tiers {
		ts.limits[i] = counters.Limit{Endpoint: s.Endpoint, Method: s.KeyMethod, Period: t.Period, Threshold: t.Threshold, Algorithm: t.Algorithm, Weight: s.Cost}.Prepare()
		name := s.ID
		if i > 0 {
			name += "-" + periodName(t.Period)
		}
		ts.names[i] = name
		ts.limitStr[i] = strconv.FormatInt(t.Threshold, 10)
		ts.rlPrefix[i] = `"` + name + `";r=`
		ts.periods[i] = t.Period
		ts.pnames[i] = periodName(t.Period)
		if i > 0 {
			policy = append(policy, ", "...)
		}
		policy = append(policy, '"')
		policy = append(policy, name...)
		policy = append(policy, `";q=`...)
		policy = strconv.AppendInt(policy, t.Threshold, 10)
		// w is whole seconds (the draft has no sub-second windows): left
		// out for other periods.
		if t.Period%time.Second == 0 {
			policy = append(policy, ";w="...)
			policy = strconv.AppendInt(policy, int64(t.Period/time.Second), 10)
		}
	}
	ts.policy = string(policy)
	return ts
}

// periodName formats a period for a policy name: "10s", "1m", "2h", "500ms".
func periodName(p time.Duration) string {
	switch {
	case p%time.Hour == 0:
		return strconv.FormatInt(int64(p/time.Hour), 10) + "h"
	case p%time.Minute == 0:
		return strconv.FormatInt(int64(p/time.Minute), 10) + "m"
	case p%time.Second == 0:
		return strconv.FormatInt(int64(p/time.Second), 10) + "s"
	}
	return strconv.FormatInt(int64(p/time.Millisecond), 10) + "ms"
}

// tenantStatus says whether a tenant supplied by a request can be counted.
type tenantStatus uint8

const (
	tenantOK      tenantStatus = iota
	tenantMissing              // none supplied, or an empty one
	tenantTooLong              // longer than MaxTenantLen
	tenantNotUTF8              // not valid UTF-8
	tenantControl              // holds a control character
)

// reason describes a refused tenant, for messages.
func (st tenantStatus) reason() string {
	switch st {
	case tenantMissing:
		return "missing"
	case tenantTooLong:
		return "longer than " + strconv.Itoa(MaxTenantLen) + " bytes"
	case tenantNotUTF8:
		return "not valid UTF-8"
	case tenantControl:
		return "holds a control character"
	}
	return "valid"
}

// checkTenant checks a tenant supplied by a request (see MaxTenantLen).
// The usual ASCII tenant costs one pass over its bytes.
func checkTenant(t string) tenantStatus {
	if t == "" {
		return tenantMissing
	}
	if len(t) > MaxTenantLen {
		return tenantTooLong
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c < 0x20 || c == 0x7f {
			return tenantControl
		}
		if c >= utf8.RuneSelf {
			return checkTenantUnicode(t[i:])
		}
	}
	return tenantOK
}

func checkTenantUnicode(t string) tenantStatus {
	if !utf8.ValidString(t) {
		return tenantNotUTF8
	}
	for _, r := range t {
		if unicode.IsControl(r) {
			return tenantControl
		}
	}
	return tenantOK
}

type tenantResult struct {
	tenant string
	st     tenantStatus
}

// tierRef says which tier of which SLA a limit of a Take is.
type tierRef struct {
	cs *compiledSLA
	ts *tierSet
	i  int
}

// slaRef is one SLA of a Take, with the tier list used for this tenant.
type slaRef struct {
	cs *compiledSLA
	ts *tierSet
}

// scratch is the per-request working memory, pooled: the limits passed to
// the limiter (an interface call) would otherwise escape to the heap.
type scratch struct {
	matches [maxMatches]Match
	tenants [maxMatches]tenantResult
	esets   [maxMatches]slaRef
	ssets   [maxMatches]slaRef
	limits  [counters.MaxLimits]counters.Limit
	refs    [counters.MaxLimits]tierRef
	shadow  [counters.MaxLimits]counters.Limit
	srefs   [counters.MaxLimits]tierRef
	path    pathSegs
	buf     [1024]byte
}

type outcomeKind uint8

const (
	outPass      outcomeKind = iota // nothing counted: serve untouched
	outAllowed                      // serve, with headers
	outDenied                       // refuse (429), with headers
	outNoTenant                     // refuse (400): no tenant
	outBadTenant                    // refuse (400): a tenant that cannot be counted
	outError                        // the limiter failed
)

// outcome is what decide concluded. For outAllowed and outDenied, d, ref
// and sets describe what the headers report.
type outcome struct {
	kind outcomeKind
	d    counters.Decision
	ref  tierRef
	sets []slaRef
	sla  *compiledSLA // outNoTenant, outBadTenant: the SLA whose tenant is refused
	tst  tenantStatus // outBadTenant: why
	err  error
}

// decide charges one request that matched ms (tenants[i] is the tenant of
// ms[i]). See Filter for the rules.
func (f *Filter) decide(ctx context.Context, c *compiled, ms []Match, tenants []tenantResult, s *scratch) outcome {
	n, m := 0, 0
	esets, ssets := s.esets[:0], s.ssets[:0]
	for i := range ms {
		cs := c.slas[ms[i].SLA.index]
		tenant, st := tenants[i].tenant, tenants[i].st
		ts := cs.base
		switch {
		case st == tenantMissing && cs.sla.Shadow:
			cs.m.noTenant.Inc()
			continue
		case st != tenantOK && cs.sla.Shadow:
			cs.m.badTenant.Inc()
			continue
		case st == tenantMissing && cs.sla.NoTenant == NoTenantReject:
			cs.m.noTenant.Inc()
			return outcome{kind: outNoTenant, sla: cs}
		case st == tenantMissing:
			tenant = SharedTenant
		case st != tenantOK:
			cs.m.badTenant.Inc()
			return outcome{kind: outBadTenant, sla: cs, tst: st}
		case cs.overrides != nil && tenant != SharedTenant:
			if o, found := cs.overrides[tenant]; found {
				ts = o
			}
		}
		if cs.sla.Shadow {
			if m+len(ts.limits) > counters.MaxLimits {
				f.fail(ctx, nil, []slaRef{{cs, ts}}, counters.ErrTooManyLimits) // skipped: never changes the outcome
				continue
			}
			for j := range ts.limits {
				s.shadow[m] = ts.limits[j]
				s.shadow[m].Tenant = tenant
				s.srefs[m] = tierRef{cs, ts, j}
				m++
			}
			ssets = append(ssets, slaRef{cs, ts})
			continue
		}
		if n+len(ts.limits) > counters.MaxLimits {
			return f.fail(ctx, esets, ssets, counters.ErrTooManyLimits)
		}
		for j := range ts.limits {
			s.limits[n] = ts.limits[j]
			s.limits[n].Tenant = tenant
			s.refs[n] = tierRef{cs, ts, j}
			n++
		}
		esets = append(esets, slaRef{cs, ts})
	}
	if n == 0 && m == 0 {
		return outcome{kind: outPass}
	}
	o := outcome{kind: outPass}
	if n > 0 {
		d, err := f.take(ctx, s.limits[:n], 1) // each limit's Weight is its SLA's cost
		if err != nil {
			return f.fail(ctx, esets, nil, err)
		}
		d.Tier = tierIndex(d.Tier, n)
		if !d.Allowed {
			ref := s.refs[d.Tier]
			ref.cs.m.denied.Inc()
			if f.log.Enabled(ctx, slog.LevelDebug) {
				f.log.Debug("request denied", "sla", ref.cs.sla.ID, "tenant", s.limits[d.Tier].Tenant,
					"period", ref.ts.periods[ref.i], "threshold", d.Limit, "retry_after", d.RetryAfter)
			}
			return outcome{kind: outDenied, d: d, ref: ref, sets: esets}
		}
		for _, e := range esets {
			e.cs.m.allowed.Inc()
		}
		o = outcome{kind: outAllowed, d: d, ref: s.refs[d.Tier], sets: esets}
	}
	if m > 0 {
		d, err := f.take(ctx, s.shadow[:m], 1)
		if err != nil {
			f.fail(ctx, nil, ssets, err) // a shadow SLA never changes the outcome
			return o
		}
		d.Tier = tierIndex(d.Tier, m)
		for _, e := range ssets {
			e.cs.m.allowed.Inc()
		}
		if !d.Allowed {
			s.srefs[d.Tier].cs.m.wouldDeny.Inc()
		}
		if n == 0 {
			o = outcome{kind: outAllowed, d: d, ref: s.srefs[d.Tier], sets: ssets}
		}
	}
	return o
}

// tierIndex guards against a Limiter returning a tier out of range (the
// limiters of this module never do): the first limit is reported then.
func tierIndex(t, n int) int {
	if t < 0 || t >= n {
		return 0
	}
	return t
}

// fail counts and logs a limiter error.
func (f *Filter) fail(ctx context.Context, esets, ssets []slaRef, err error) outcome {
	for _, e := range esets {
		e.cs.m.errors.Inc()
	}
	for _, e := range ssets {
		e.cs.m.errors.Inc()
	}
	now := time.Now().UnixNano()
	if last := f.lastLog.Load(); now-last >= int64(time.Second) && f.lastLog.CompareAndSwap(last, now) {
		f.log.Error("rate limiter failed", "fail_closed", f.failClosed, "err", err)
	}
	return outcome{kind: outError, err: err}
}

func (f *Filter) take(ctx context.Context, limits []counters.Limit, cost int64) (counters.Decision, error) {
	if f.timed != nil {
		return f.timed.TakeAt(f.clock(), limits, cost)
	}
	return f.lim.Take(ctx, limits, cost)
}

// ceilSeconds rounds d up to whole seconds, 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// Header values, in the order of hdrBlock.v.
const (
	vLimit = iota
	vRemaining
	vReset
	vPolicy
	vRateLimit
	vRetryAfter  // denied only
	vContentType // denied only (HTTP)
	numValues
)

// hdrBlock holds the header values of one response: the strings and the
// bytes they are made of, in one small allocation (160 bytes: its size
// matters, since on a busy server the memory it gets is not in cache). Each
// header gets a one-element slice of v. The numbers live in the RateLimit
// string, `"name";r=REMAINING;t=RESET`, and X-Ratelimit-Remaining and
// X-Ratelimit-Reset are substrings of it. buf is written once, before any
// string is made from it, and never again.
type hdrBlock struct {
	v   [numValues]string
	buf [48]byte // enough for ids of up to about 30 bytes; longer ones spill
}

// values formats the rate-limit values of an allowed or denied outcome.
// It allocates the block and, when several SLAs report, the joined policy.
// buf is scratch space, free again on return.
func (o *outcome) values(buf []byte) *hdrBlock {
	blk := new(hdrBlock)
	v := &blk.v
	d := &o.d
	ts, i := o.ref.ts, o.ref.i
	remaining := max(d.Remaining, 0)
	if !d.Allowed {
		remaining = 0
	}
	reset := ceilSeconds(d.Reset)
	t := reset
	retry := int64(0)
	if o.kind == outDenied {
		// Retry-After must not be before the end of RateLimit's window t.
		retry = max(ceilSeconds(d.RetryAfter), 1)
		t = min(t, retry)
	}
	b := append(blk.buf[:0], ts.rlPrefix[i]...)
	r0 := len(b)
	b = strconv.AppendInt(b, remaining, 10)
	r1 := len(b)
	b = append(b, ";t="...)
	t0 := len(b)
	b = strconv.AppendInt(b, t, 10)
	t1 := len(b)
	x0, x1 := t0, t1 // X-Ratelimit-Reset: t, unless a denial cut t short
	if t != reset {
		b = strconv.AppendInt(b, reset, 10)
		x0, x1 = t1, len(b)
	}
	a0 := len(b)
	if o.kind == outDenied {
		b = strconv.AppendInt(b, retry, 10)
	}
	// b is blk.buf (or, had it not fitted, a fresh array): either way it
	// is not written again, so strings may share its bytes.
	str := unsafe.String(unsafe.SliceData(b), len(b))
	v[vRateLimit] = str[:t1]
	v[vRemaining] = str[r0:r1]
	v[vReset] = str[x0:x1]
	v[vRetryAfter] = str[a0:]
	v[vLimit] = ts.limitStr[i]
	if len(o.sets) == 1 {
		v[vPolicy] = o.sets[0].ts.policy
	} else {
		p := buf[:0]
		for k, e := range o.sets {
			if k > 0 {
				p = append(p, ", "...)
			}
			p = append(p, e.ts.policy...)
		}
		v[vPolicy] = string(p)
	}
	return blk
}
