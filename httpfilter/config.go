package httpfilter

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/peerlimit/peerlimit/counters"
	"io"
	"os"
	"strings"
	"time"
)

// MaxFileSize is the largest limits file [Parse], [LoadFile] and [Reloader]
// accept, in bytes. Larger files are rejected rather than parsed.
const MaxFileSize = 4 << 20

// ErrInvalidLimits is wrapped by every [FieldError]: errors.Is(err,
// ErrInvalidLimits) tells a bad limits file from an I/O error.
var ErrInvalidLimits = errors.New("invalid limits")

// FieldError is one problem found in a limits file. [Parse] returns them
// joined with [errors.Join], in file order (the first 20, then one whose
// Msg counts the others); use errors.As to get the first one, or range
// over the joined error's Unwrap() []error.
//
// Error() reads "file:line: sla \"id\": field: message", for example
//
//	limits.yaml:12: sla "get-product": tiers[1].period: must be > 0, got 0
//
// The SLA part is `slas[i]` when the SLA has no usable id, and absent for
// errors outside an SLA (defaults, syntax errors). The zero value is not
// useful.
type FieldError struct {
	File     string // name given to Parse (the path for LoadFile)
	Line     int    // 1-based; 0 when unknown
	SLA      string // SLA id, or "" when unknown or not in an SLA
	SLAIndex int    // index in slas, or -1 when not in an SLA
	Field    string // dotted path within the SLA (or the file), e.g. "tiers[1].period"
	Msg      string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	switch {
	case e.SLA != "":
		fmt.Fprintf(&b, "sla %q: ", e.SLA)
	case e.SLAIndex >= 0:
		fmt.Fprintf(&b, "slas[%d]: ", e.SLAIndex)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns [ErrInvalidLimits].
func (e *FieldError) Unwrap() error { return ErrInvalidLimits }

// Algorithm is the counting algorithm of a tier: the core's own type, so
// that a tier maps onto a counters.Limit without translation. The zero value
// is [Fixed].
type Algorithm = counters.Algorithm

const (
	// Fixed counts in windows aligned on the Unix clock:
	// start = floor(now/period)*period (the seed's algorithm).
	Fixed = counters.Fixed
	// Sliding weighs the previous fixed window by the part of it still
	// inside the sliding period (Kong's sliding window counter).
	Sliding = counters.Sliding
)

// NoTenantPolicy says what happens to a request whose tenant cannot be
// determined (missing header, func returned no tenant). The zero value is
// [NoTenantReject].
type NoTenantPolicy uint8

const (
	// NoTenantReject rejects the request (HTTP 400, gRPC InvalidArgument).
	NoTenantReject NoTenantPolicy = iota
	// NoTenantShared counts the request in one bucket shared by every
	// caller without a tenant.
	NoTenantShared
)

func (p NoTenantPolicy) String() string {
	switch p {
	case NoTenantReject:
		return "reject"
	case NoTenantShared:
		return "shared"
	}
	return fmt.Sprintf("NoTenantPolicy(%d)", uint8(p))
}

// TenantKind says where the tenant of a request comes from.
type TenantKind uint8

const (
	// TenantNone: no source; every request is "without tenant" and the
	// SLA's NoTenant policy applies (only allowed with NoTenantShared: one
	// global bucket).
	TenantNone TenantKind = iota
	// TenantPath: a {name} variable of the SLA's path pattern.
	TenantPath
	// TenantHeader: an HTTP request header (for gRPC SLAs: the metadata
	// key of the same name, lower-cased).
	TenantHeader
	// TenantMetadata: a gRPC metadata key (gRPC SLAs only).
	TenantMetadata
	// TenantFunc: a Go function registered under Name when the middleware
	// is constructed.
	TenantFunc
)

func (k TenantKind) String() string {
	switch k {
	case TenantNone:
		return "none"
	case TenantPath:
		return "fromPath"
	case TenantHeader:
		return "header"
	case TenantMetadata:
		return "metadata"
	case TenantFunc:
		return "func"
	}
	return fmt.Sprintf("TenantKind(%d)", uint8(k))
}

// TenantSource is where an SLA takes the tenant from. The zero value is
// TenantNone.
type TenantSource struct {
	Kind TenantKind
	// Name as written in the file: the path variable, header name, metadata
	// key or func name.
	Name string
	// Key is Name ready for lookup without allocation: for TenantHeader on
	// an HTTP SLA the canonical header key (textproto), for TenantHeader on
	// a gRPC SLA and for TenantMetadata the lower-cased metadata key,
	// otherwise Name.
	Key string
	// Index is the position of the variable in [Captures] for TenantPath,
	// otherwise -1.
	Index int
	// Inferred is true when the file set no tenant source for the SLA and
	// the only {variable} of its path pattern was taken.
	Inferred bool
	// Line is the line of the source in the file (0 when inferred).
	Line int
}

// Tier is one limit of an SLA: at most Threshold units of cost per Period.
// Every tier of an SLA must pass for a request to be admitted. It is a plain
// value; the zero value (period 0) is never produced by Parse. Line is for
// messages only: compare tiers by Period, Threshold and Algorithm.
type Tier struct {
	Period    time.Duration // > 0, whole milliseconds, at most one year
	Threshold int64         // >= 0; 0 denies every request
	Algorithm Algorithm
	Line      int // line of the tier in the file
}

// SLA is one rate-limit definition, with its defaults already applied.
// SLAs come from [Parse]: the zero value matches nothing. Values returned by
// Parse must not be modified; they are safe for concurrent reads.
type SLA struct {
	ID          string
	Description string
	Line        int // line of the SLA in the file
	Enabled     bool

	// HTTP SLAs: Methods in canonical order (GET, HEAD, POST, PUT, PATCH,
	// DELETE, OPTIONS, CONNECT, TRACE), nil meaning every method; Pattern
	// non-nil. gRPC SLAs: GRPCMethods sorted, Pattern nil.
	Methods     []string
	Pattern     *Pattern
	GRPCMethods []string

	// Endpoint and KeyMethod are the endpoint and method components of the
	// SLA's counter keys (tenant, Endpoint, KeyMethod, period). They depend
	// only on what the SLA matches — not on its id, position, thresholds or
	// the order of lists — so an SLA that a reload leaves unchanged keeps
	// its counters. Endpoint is the pattern string (HTTP) or the sorted
	// gRPC method patterns joined by ","; KeyMethod is Methods joined by
	// "," ("*" for every method), or "GRPC".
	Endpoint  string
	KeyMethod string

	Tenant   TenantSource
	NoTenant NoTenantPolicy
	Shadow   bool  // count and report, never deny
	Cost     int64 // units charged per request, >= 1

	Tiers []Tier
	// Overrides replace Tiers entirely for the listed tenants.
	Overrides map[string][]Tier

	methods   uint16 // bit i set: methodNames[i] matches; bit otherMethod: extension methods
	grpc      []grpcPattern
	overrides []override // Overrides in file order, for messages
	index     int        // position in the file's slas list
}

type override struct {
	field string // "overrides[i]"
	tiers []Tier
}

// IsGRPC reports whether the SLA matches gRPC methods rather than HTTP paths.
func (s *SLA) IsGRPC() bool { return s.Pattern == nil }

// TiersFor returns the tiers that apply to tenant: its override if it has
// one, otherwise Tiers. It does not allocate. The caller must not modify
// the result.
func (s *SLA) TiersFor(tenant string) []Tier {
	if t, ok := s.Overrides[tenant]; ok {
		return t
	}
	return s.Tiers
}

// MatchHTTP reports whether an HTTP request with this method and escaped
// path matches the SLA, with the path's captures. It ignores Enabled. The
// path is matched as by [Limits.MatchHTTP]; the method is compared as it
// is: whether HEAD falls back to a GET SLA depends on the other SLAs, which
// only [Limits.MatchHTTP] knows.
func (s *SLA) MatchHTTP(method, path string) (Captures, bool) {
	var c Captures
	if s.Pattern == nil || s.methods&methodBit(method) == 0 {
		return c, false
	}
	var ps pathSegs
	if !ps.split(path, true) || !ps.clean && method != "CONNECT" {
		return c, false
	}
	ok := s.Pattern.matchSegs(&ps, &c)
	return c, ok
}

// MatchGRPC reports whether the full gRPC method name matches the SLA. It
// ignores Enabled.
func (s *SLA) MatchGRPC(fullMethod string) bool {
	for i := range s.grpc {
		if s.grpc[i].match(fullMethod) {
			return true
		}
	}
	return false
}

// Limits is a parsed limits file: every SLA in file order (disabled ones
// included) and a router over the enabled ones. The zero value has no SLAs
// and matches nothing. A *Limits returned by [Parse] is immutable and safe
// for concurrent use; [Reloader] swaps whole *Limits values.
type Limits struct {
	Source string   // the name given to Parse
	Digest [32]byte // SHA-256 of the file content
	SLAs   []SLA

	router router
}

// SLA returns the SLA with this id, or nil.
func (l *Limits) SLA(id string) *SLA {
	for i := range l.SLAs {
		if l.SLAs[i].ID == id {
			return &l.SLAs[i]
		}
	}
	return nil
}

// TenantFuncs returns the names of the tenant funcs the SLAs refer to, in
// file order, each once.
func (l *Limits) TenantFuncs() []string {
	var names []string
	seen := map[string]bool{}
	for i := range l.SLAs {
		t := &l.SLAs[i].Tenant
		if t.Kind == TenantFunc && !seen[t.Name] {
			seen[t.Name] = true
			names = append(names, t.Name)
		}
	}
	return names
}

// CheckTenantFuncs returns a [FieldError] (joined, in file order) for every
// SLA whose tenant func is not known, or nil. The middleware calls it at
// construction with the funcs it was given; [WithTenantFuncs] makes the
// loader do the same check.
func (l *Limits) CheckTenantFuncs(known func(name string) bool) error {
	var errs []error
	for i := range l.SLAs {
		s := &l.SLAs[i]
		if s.Tenant.Kind == TenantFunc && !known(s.Tenant.Name) {
			errs = append(errs, &FieldError{File: l.Source, Line: s.Tenant.Line, SLA: s.ID, SLAIndex: i,
				Field: "tenant.func", Msg: fmt.Sprintf("unknown tenant func %q (register it in the Go API)", s.Tenant.Name)})
		}
	}
	return errors.Join(errs...)
}

// Option changes how [Parse] and [LoadFile] check a file. Options are
// values with no state of their own; reuse them freely.
type Option func(*parseOptions)

type parseOptions struct {
	funcs map[string]bool // nil: func names are not checked
}

// WithTenantFuncs declares the tenant funcs the program registers. A file
// that refers to any other func is rejected. Without this option func names
// are only checked for syntax; see [Limits.CheckTenantFuncs].
func WithTenantFuncs(names ...string) Option {
	return func(o *parseOptions) {
		if o.funcs == nil {
			o.funcs = map[string]bool{}
		}
		for _, n := range names {
			o.funcs[n] = true
		}
	}
}

// LoadFile reads and parses the limits file at path. Errors in the file are
// [FieldError]s naming path; an I/O error is wrapped with "httpfilter:".
func LoadFile(path string, opts ...Option) (*Limits, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, opts...)
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("httpfilter: load limits: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("httpfilter: load limits: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("httpfilter: load limits: %s: larger than %d bytes", path, MaxFileSize)
	}
	return data, nil
}

// Parse parses a limits file. name is used in error messages (usually the
// file's path). It returns the problems found, each a [FieldError] whose
// message starts with name, joined in file order: the first 20, then one
// that says how many more there are. It never returns a partial result.
// data larger than [MaxFileSize] is refused unread.
func Parse(name string, data []byte, opts ...Option) (*Limits, error) {
	var o parseOptions
	for _, opt := range opts {
		opt(&o)
	}
	d := &decoder{file: name, opts: o}
	if len(data) > MaxFileSize {
		d.errorf(fileScope, 0, "", "file is %d bytes, larger than %d (MaxFileSize)", len(data), MaxFileSize)
		return nil, d.err()
	}
	l := d.parse(data)
	if err := d.err(); err != nil {
		return nil, err
	}
	l.Source = name
	l.Digest = sha256.Sum256(data)
	l.router = buildRouter(l.SLAs)
	return l, nil
}
