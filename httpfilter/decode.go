package httpfilter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/textproto"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Bounds on what a limits file may say. Values beyond them are certainly
// mistakes (a typo, a unit confusion) and would only overflow arithmetic
// further down.
const (
	maxPeriod        = 365 * 24 * time.Hour
	maxThreshold     = 1_000_000_000_000_000 // 1e15
	maxCost          = maxThreshold
	maxTiers         = 16
	maxIDLen         = 64
	maxTenantLen     = 256
	maxHeaderLen     = 256
	maxDescription   = 1024
	maxNodes         = 1_000_000 // YAML nodes visited, aliases expanded
	maxAliasDepth    = 64
	maxDepth         = 200 // nesting, aliases expanded; a limits file needs about 8
	periodFieldUnits = "a number of seconds or a duration such as \"500ms\", \"10s\" or \"1m\""
)

// maxErrors is the number of errors Parse reports; the joined error ends
// with one that counts the others. maxKeptErrors bounds what the decoder
// keeps (and formats) before it sorts them: a file of 60,000 bad SLAs
// costs counting, not 60,000 messages.
const (
	maxErrors     = 20
	maxKeptErrors = 1000
)

// decoder walks the yaml.Node tree of a limits file.
//
// Why a hand-written walk rather than yaml's struct decoding with
// KnownFields(true): Node.Decode ignores KnownFields, struct decoding stops at
// the first error and loses line numbers for semantic errors, and we want
// every error, in file order, with file, line, SLA and field. The walk
// checks unknown and duplicate keys itself.
type decoder struct {
	file    string
	opts    parseOptions
	errs    []*FieldError // the first maxKeptErrors found
	dropped int           // errors found past those
}

// scope locates errors: which SLA (if any) and the field prefix.
type scope struct {
	sla    string // SLA id, "" if none/unknown
	idx    int    // SLA index, -1 outside slas
	prefix string // e.g. "overrides[0]."
}

var fileScope = scope{idx: -1}

func (sc scope) sub(prefix string) scope {
	sc.prefix += prefix
	return sc
}

func (d *decoder) errorf(sc scope, line int, field, format string, args ...any) {
	if len(d.errs) >= maxKeptErrors {
		d.dropped++
		return
	}
	f := sc.prefix + field
	f = strings.TrimSuffix(f, ".")
	d.errs = append(d.errs, &FieldError{File: d.file, Line: line, SLA: sc.sla, SLAIndex: sc.idx,
		Field: f, Msg: fmt.Sprintf(format, args...)})
}

// count returns the number of errors found so far.
func (d *decoder) count() int { return len(d.errs) + d.dropped }

// err returns the errors found, at most maxErrors of them in file order
// and then one that counts the rest, joined; nil if there were none. (Past
// maxKeptErrors, the ones reported are the first found, sorted, which for
// such a file is near enough the first in the file.)
func (d *decoder) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
	n := min(len(d.errs), maxErrors)
	errs := make([]error, n, n+1)
	for i, e := range d.errs[:n] {
		errs[i] = e
	}
	if more := len(d.errs) - n + d.dropped; more > 0 {
		noun := "errors"
		if more == 1 {
			noun = "error"
		}
		errs = append(errs, &FieldError{File: d.file, SLAIndex: -1, Msg: fmt.Sprintf("and %d more %s", more, noun)})
	}
	return errors.Join(errs...)
}

var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (d *decoder) syntaxError(err error) {
	msg := err.Error()
	line := 0
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	d.errorf(fileScope, line, "", "invalid YAML: %s", msg)
}

// decodeDoc decodes one YAML document into a Node, turning a panic of the
// YAML library into an error: bad input must never crash a node.
func decodeDoc(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: parser failure: %v", r)
		}
	}()
	return dec.Decode(n)
}

func (d *decoder) parse(data []byte) *Limits {
	l := &Limits{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	// KnownFields has no effect when decoding into a yaml.Node; unknown
	// fields are rejected by the walk below. Set anyway so that a future
	// change to struct decoding stays strict.
	dec.KnownFields(true)
	var doc yaml.Node
	err := decodeDoc(dec, &doc)
	if err == io.EOF {
		d.errorf(fileScope, 0, "", "file is empty (expected a mapping with \"slas\")")
		return l
	}
	if err != nil {
		d.syntaxError(err)
		return l
	}
	var extra yaml.Node
	if err := decodeDoc(dec, &extra); err != io.EOF {
		if err != nil {
			d.syntaxError(err)
		} else {
			d.errorf(fileScope, extra.Line, "", "more than one YAML document; a limits file has exactly one")
		}
		return l
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		d.errorf(fileScope, doc.Line, "", "file is empty (expected a mapping with \"slas\")")
		return l
	}
	root := doc.Content[0]
	if budget := maxNodes; !withinBudget(root, &budget, 0) {
		d.errorf(fileScope, root.Line, "", "document too large: more than %d YAML nodes (aliases expanded) or nested deeper than %d", maxNodes, maxDepth)
		return l
	}
	root = resolve(root)
	if isNull(root) {
		d.errorf(fileScope, 0, "", "file is empty (expected a mapping with \"slas\")")
		return l
	}
	top, unknown := d.mapping(root, fileScope, "", "defaults", "slas")
	if top == nil {
		return l
	}
	defs := defaults{cost: 1}
	if kv, ok := top["defaults"]; ok {
		defs = d.defaults(kv.val)
	}
	kv, ok := top["slas"]
	if !ok {
		if !unknown {
			d.errorf(fileScope, root.Line, "slas", "required: the list of SLAs")
		}
		return l
	}
	items := d.seq(kv.val, fileScope, "slas")
	if items == nil {
		return l
	}
	if len(items) == 0 {
		d.errorf(fileScope, kv.val.Line, "slas", "empty: define at least one SLA (to enforce nothing, keep one with enabled: false)")
		return l
	}
	l.SLAs = make([]SLA, 0, len(items))
	ids := map[string]int{} // id -> line
	for i, item := range items {
		s, ok := d.sla(item, i, &defs, ids)
		if ok {
			l.SLAs = append(l.SLAs, s)
		}
	}
	d.checkKeyCollisions(l.SLAs)
	return l
}

// withinBudget reports whether the tree, with aliases expanded, has at most
// *budget nodes and nests at most maxDepth deep. Every visit spends one unit
// of the budget, so the check itself costs at most *budget steps, even for
// alias bombs and alias cycles (which the YAML parser lets through when
// decoding into a yaml.Node).
func withinBudget(n *yaml.Node, budget *int, depth int) bool {
	if n == nil {
		return true
	}
	*budget--
	if *budget < 0 || depth > maxDepth {
		return false
	}
	if n.Kind == yaml.AliasNode {
		return withinBudget(n.Alias, budget, depth+1)
	}
	for _, ch := range n.Content {
		if !withinBudget(ch, budget, depth+1) {
			return false
		}
	}
	return true
}

// resolve follows aliases. Alias cycles are rejected by the parser; the
// depth bound is a second guard.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < maxAliasDepth; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

type kv struct {
	key, val *yaml.Node
}

// mapping checks that n is a mapping whose keys are all in known, each at
// most once, and returns the (alias-resolved) values by key. Keys whose value
// is null ("field:" with nothing after it) count as absent. Returns nil if n
// is not a mapping. unknown reports unknown keys: callers then skip
// "required" errors, as the unknown key is most likely the required one
// misspelt.
func (d *decoder) mapping(n *yaml.Node, sc scope, field string, known ...string) (out map[string]kv, unknown bool) {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		d.errorf(sc, line(n), field, "must be a mapping, got %s", describe(n))
		return nil, false
	}
	prefix := field
	if prefix != "" {
		prefix += "."
	}
	out = make(map[string]kv, len(n.Content)/2)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k == nil || k.Kind != yaml.ScalarNode {
			d.errorf(sc, line(k), field, "keys must be plain names, got %s", describe(k))
			continue
		}
		name := k.Value
		if name == "<<" {
			d.errorf(sc, k.Line, prefix+name, "merge keys are not supported; repeat the fields or use an alias for the whole value")
			continue
		}
		if !slices.Contains(known, name) {
			d.errorf(sc, k.Line, prefix+name, "unknown field (known fields: %s)", strings.Join(known, ", "))
			unknown = true
			continue
		}
		if first, dup := seen[name]; dup {
			d.errorf(sc, k.Line, prefix+name, "duplicate field (first at line %d)", first)
			continue
		}
		seen[name] = k.Line
		if isNull(v) {
			continue
		}
		out[name] = kv{key: k, val: v}
	}
	return out, unknown
}

func line(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

// describe names a node's type for messages.
func describe(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return fmt.Sprintf("string %q", v)
		case "!!int", "!!float":
			return "number " + v
		case "!!bool":
			return "boolean " + v
		}
		return fmt.Sprintf("%s %q", n.ShortTag(), v)
	}
	return "nothing"
}

func (d *decoder) seq(n *yaml.Node, sc scope, field string) []*yaml.Node {
	n = resolve(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		d.errorf(sc, line(n), field, "must be a list, got %s", describe(n))
		return nil
	}
	out := make([]*yaml.Node, 0, len(n.Content))
	for _, it := range n.Content {
		out = append(out, resolve(it))
	}
	return out
}

// str returns the text of a scalar. Numbers are accepted as text (tenant ids
// like 12345 need no quotes); null, booleans and collections are not.
func (d *decoder) str(n *yaml.Node, sc scope, field string) (string, bool) {
	if n == nil || n.Kind != yaml.ScalarNode || isNull(n) || n.ShortTag() == "!!bool" {
		d.errorf(sc, line(n), field, "must be a string, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) boolean(n *yaml.Node, sc scope, field string) (bool, bool) {
	if n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		if b, err := strconv.ParseBool(strings.ToLower(n.Value)); err == nil {
			return b, true
		}
	}
	d.errorf(sc, line(n), field, "must be true or false, got %s", describe(n))
	return false, false
}

// integer returns a whole number. Integers beyond int64 are clamped to
// ±MaxInt64 so that the caller's range check reports them with the text
// as written; floats are accepted when whole (1e6).
func (d *decoder) integer(n *yaml.Node, sc scope, field string) (int64, bool) {
	if n != nil && n.Kind == yaml.ScalarNode {
		plain := strings.ReplaceAll(n.Value, "_", "")
		switch n.ShortTag() {
		case "!!int":
			if v, err := strconv.ParseInt(plain, 0, 64); err == nil {
				return v, true
			} else if errors.Is(err, strconv.ErrRange) {
				if strings.HasPrefix(plain, "-") {
					return math.MinInt64, true
				}
				return math.MaxInt64, true
			}
		case "!!float":
			if f, err := strconv.ParseFloat(plain, 64); err == nil || errors.Is(err, strconv.ErrRange) {
				switch {
				case math.IsNaN(f):
				case f >= math.MaxInt64:
					return math.MaxInt64, true
				case f <= math.MinInt64:
					return math.MinInt64, true
				case f == math.Trunc(f):
					return int64(f), true
				default:
					d.errorf(sc, n.Line, field, "must be a whole number, got %s", n.Value)
					return 0, false
				}
			}
		}
	}
	d.errorf(sc, line(n), field, "must be a whole number, got %s", describe(n))
	return 0, false
}

func (d *decoder) enum(n *yaml.Node, sc scope, field string, values ...string) (int, bool) {
	s, ok := d.str(n, sc, field)
	if !ok {
		return 0, false
	}
	for i, v := range values {
		if s == v {
			return i, true
		}
	}
	d.errorf(sc, n.Line, field, "unknown value %q (one of: %s)", s, strings.Join(values, ", "))
	return 0, false
}

// defaults are the values of the top-level defaults block.
type defaults struct {
	tenant    tenantSpec
	noTenant  NoTenantPolicy
	shadow    bool
	cost      int64
	algorithm Algorithm
}

func (d *decoder) defaults(n *yaml.Node) defaults {
	defs := defaults{cost: 1}
	sc := fileScope
	m, _ := d.mapping(n, sc, "defaults", "tenant", "noTenant", "shadow", "cost", "algorithm")
	if m == nil {
		return defs
	}
	sc = sc.sub("defaults.")
	if kv, ok := m["tenant"]; ok {
		defs.tenant = d.tenant(kv.val, sc, "tenant")
		defs.tenant.fromDefaults = true
	}
	if kv, ok := m["noTenant"]; ok {
		if v, ok := d.enum(kv.val, sc, "noTenant", "reject", "shared"); ok {
			defs.noTenant = NoTenantPolicy(v)
		}
	}
	if kv, ok := m["shadow"]; ok {
		defs.shadow, _ = d.boolean(kv.val, sc, "shadow")
	}
	if kv, ok := m["cost"]; ok {
		if v, ok := d.cost(kv.val, sc); ok {
			defs.cost = v
		}
	}
	if kv, ok := m["algorithm"]; ok {
		if v, ok := d.enum(kv.val, sc, "algorithm", "fixed", "sliding"); ok {
			defs.algorithm = Algorithm(v)
		}
	}
	return defs
}

func (d *decoder) cost(n *yaml.Node, sc scope) (int64, bool) {
	v, ok := d.integer(n, sc, "cost")
	if !ok {
		return 0, false
	}
	if v < 1 {
		d.errorf(sc, n.Line, "cost", "must be >= 1, got %s", n.Value)
		return 0, false
	}
	if v > maxCost {
		d.errorf(sc, n.Line, "cost", "must be <= %d, got %s", int64(maxCost), n.Value)
		return 0, false
	}
	return v, true
}

// tenantSpec is a tenant source as written (before it is tied to an SLA).
type tenantSpec struct {
	kind         TenantKind
	name         string
	line         int
	fromDefaults bool
	explicitNone bool // "tenant: none"
	valid        bool // set and well-formed
	set          bool // present in the file, valid or not
}

func (d *decoder) tenant(n *yaml.Node, sc scope, field string) tenantSpec {
	t := tenantSpec{line: line(n), set: true}
	if n.Kind == yaml.ScalarNode && n.Value == "none" {
		t.explicitNone, t.valid = true, true
		return t
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(sc, line(n), field, "must be none or a mapping with one of fromPath, header, metadata, func; got %s", describe(n))
		return t
	}
	m, unknown := d.mapping(n, sc, field, "fromPath", "header", "metadata", "func")
	if m == nil {
		return t
	}
	if len(m) != 1 {
		if unknown && len(m) == 0 {
			return t
		}
		d.errorf(sc, line(n), field, "set exactly one of fromPath, header, metadata, func; got %d", len(m))
		return t
	}
	var key string
	var v kv
	for key, v = range m {
	}
	f := field + "." + key
	name, ok := d.str(v.val, sc, f)
	if !ok {
		return t
	}
	t.line = v.key.Line
	switch key {
	case "fromPath":
		t.kind = TenantPath
		if err := checkIdent(name); err != nil {
			d.errorf(sc, v.val.Line, f, "path variable name %v", err)
			return t
		}
	case "header":
		t.kind = TenantHeader
		if !validToken(name, maxHeaderLen) {
			d.errorf(sc, v.val.Line, f, "invalid header name %q (letters, digits and !#$%%&'*+-.^_`|~, at most %d bytes)", name, maxHeaderLen)
			return t
		}
	case "metadata":
		t.kind = TenantMetadata
		name = strings.ToLower(name)
		if msg := checkMetadataKey(name); msg != "" {
			d.errorf(sc, v.val.Line, f, "invalid metadata key %q: %s", v.val.Value, msg)
			return t
		}
	case "func":
		t.kind = TenantFunc
		if !validFuncName(name) {
			d.errorf(sc, v.val.Line, f, "invalid func name %q (letters, digits, _ . -; starting with a letter or _; at most %d bytes)", name, maxNameLen)
			return t
		}
		if d.opts.funcs != nil && !d.opts.funcs[name] {
			d.errorf(sc, v.val.Line, f, "unknown tenant func %q (registered: %s)", name, strings.Join(sortedKeys(d.opts.funcs), ", "))
			return t
		}
	}
	t.name = name
	t.valid = true
	return t
}

func sortedKeys(m map[string]bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	if len(ks) == 0 {
		return []string{"none"}
	}
	return ks
}

// validToken reports whether s is an RFC 9110 token (header names).
func validToken(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isIdentByte(c) {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^`|~", rune(c)) {
			return false
		}
	}
	return true
}

// checkMetadataKey checks a lower-cased gRPC metadata key.
func checkMetadataKey(s string) string {
	if s == "" || len(s) > maxHeaderLen {
		return fmt.Sprintf("must be 1 to %d bytes", maxHeaderLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z') && !('0' <= c && c <= '9') && c != '-' && c != '_' && c != '.' {
			return "only letters, digits, - _ . are allowed"
		}
	}
	if strings.HasPrefix(s, "grpc-") {
		return "keys starting with grpc- are reserved by gRPC"
	}
	if strings.HasSuffix(s, "-bin") {
		return "binary (-bin) metadata cannot carry a tenant id"
	}
	return ""
}

func validFuncName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !letter && !(i > 0 && (isIdentByte(c) || c == '.' || c == '-')) {
			return false
		}
	}
	return true
}

func validID(s string) bool {
	if s == "" || len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isIdentByte(c) && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

// sla decodes one SLA. ok is false when it has errors.
func (d *decoder) sla(n *yaml.Node, idx int, defs *defaults, ids map[string]int) (SLA, bool) {
	before := d.count()
	s := SLA{Line: line(n), Enabled: true, Cost: defs.cost, NoTenant: defs.noTenant, Shadow: defs.shadow, index: idx}
	sc := scope{idx: idx, sla: peekID(n)}
	m, unknown := d.mapping(n, sc, "", "id", "description", "enabled", "match", "tenant", "noTenant", "shadow", "cost", "tiers", "overrides")
	if m == nil {
		return s, false
	}
	// The id first, so that every other error names the SLA.
	if kv, ok := m["id"]; ok {
		if id, ok := d.str(kv.val, sc, "id"); ok {
			if id != "" {
				sc.sla = id
			}
			switch {
			case !validID(id):
				d.errorf(sc, kv.val.Line, "id", "invalid id %q: must be 1 to %d of A-Z a-z 0-9 . _ -", id, maxIDLen)
			default:
				if first, dup := ids[id]; dup {
					d.errorf(sc, kv.val.Line, "id", "duplicate id (first at line %d)", first)
				} else {
					ids[id] = kv.val.Line
				}
			}
			s.ID = id
		}
	} else if !unknown {
		d.errorf(sc, s.Line, "id", "required")
	}
	if kv, ok := m["description"]; ok {
		if v, ok := d.str(kv.val, sc, "description"); ok {
			if len(v) > maxDescription {
				d.errorf(sc, kv.val.Line, "description", "longer than %d bytes", maxDescription)
			}
			s.Description = v
		}
	}
	if kv, ok := m["enabled"]; ok {
		if v, ok := d.boolean(kv.val, sc, "enabled"); ok {
			s.Enabled = v
		}
	}
	if kv, ok := m["shadow"]; ok {
		if v, ok := d.boolean(kv.val, sc, "shadow"); ok {
			s.Shadow = v
		}
	}
	if kv, ok := m["noTenant"]; ok {
		if v, ok := d.enum(kv.val, sc, "noTenant", "reject", "shared"); ok {
			s.NoTenant = NoTenantPolicy(v)
		}
	}
	costLine := 0
	if kv, ok := m["cost"]; ok {
		if v, ok := d.cost(kv.val, sc); ok {
			s.Cost = v
			costLine = kv.val.Line
		}
	}
	if kv, ok := m["match"]; ok {
		d.match(kv.val, sc, &s)
	} else if !unknown {
		d.errorf(sc, s.Line, "match", "required (pathPattern for HTTP, or grpcMethods for gRPC)")
	}
	if kv, ok := m["tiers"]; ok {
		s.Tiers = d.tiers(kv.val, sc, "tiers", defs.algorithm)
	} else if !unknown {
		d.errorf(sc, s.Line, "tiers", "required: at least one {period, threshold}")
	}

	var spec tenantSpec
	if kv, ok := m["tenant"]; ok {
		spec = d.tenant(kv.val, sc, "tenant")
	} else {
		spec = defs.tenant
	}
	// Bind the tenant whenever the matcher compiled, even if other match
	// fields had errors, so that tenant errors are reported in the same run.
	tenantBound := (s.Pattern != nil || len(s.grpc) > 0) && d.bindTenant(&s, spec, sc)
	d.checkCost(&s, sc, s.Tiers, "tiers", costLine)
	if kv, ok := m["overrides"]; ok {
		d.overrides(kv.val, sc, &s, defs.algorithm, tenantBound, costLine)
	}
	return s, d.count() == before
}

// peekID returns the id of an SLA mapping if it is a non-empty scalar, so
// that errors about keys found before it can name the SLA.
func peekID(n *yaml.Node) string {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k != nil && k.Kind == yaml.ScalarNode && k.Value == "id" && v != nil && v.Kind == yaml.ScalarNode && !isNull(v) {
			return v.Value
		}
	}
	return ""
}

// match decodes the match block into s. It reports whether s has a usable
// matcher.
func (d *decoder) match(n *yaml.Node, sc scope, s *SLA) bool {
	m, unknown := d.mapping(n, sc, "match", "methods", "pathPattern", "grpcMethods")
	if m == nil {
		return false
	}
	sc = sc.sub("match.")
	pp, hasPath := m["pathPattern"]
	gm, hasGRPC := m["grpcMethods"]
	switch {
	case hasPath && hasGRPC:
		d.errorf(sc, gm.key.Line, "grpcMethods", "an SLA is either HTTP (pathPattern) or gRPC (grpcMethods), not both")
		return false
	case !hasPath && !hasGRPC:
		if unknown {
			return false
		}
		d.errorf(sc, line(n), "", "pathPattern (HTTP) or grpcMethods (gRPC) is required")
		return false
	case hasGRPC:
		if mk, ok := m["methods"]; ok {
			d.errorf(sc, mk.key.Line, "methods", "HTTP methods do not apply to a gRPC SLA (grpcMethods)")
		}
		return d.grpcMethods(gm.val, sc, s)
	}
	ok := true
	src, sok := d.str(pp.val, sc, "pathPattern")
	if sok {
		p, err := compilePattern(src)
		if err != nil {
			d.errorf(sc, pp.val.Line, "pathPattern", "invalid pattern %q: %v", src, err)
			ok = false
		} else {
			s.Pattern = p
			s.Endpoint = p.String()
		}
	} else {
		ok = false
	}
	s.methods = allMethods
	s.KeyMethod = "*"
	if mk, has := m["methods"]; has {
		items := d.seq(mk.val, sc, "methods")
		if items == nil {
			return false
		}
		if len(items) == 0 {
			d.errorf(sc, mk.val.Line, "methods", "empty list: omit the field to match every method")
			return false
		}
		var mask uint16
		for i, it := range items {
			f := fmt.Sprintf("methods[%d]", i)
			name, sok := d.str(it, sc, f)
			if !sok {
				ok = false
				continue
			}
			idx := methodIndex(name)
			if idx == otherMethod {
				hint := ""
				if up := strings.ToUpper(name); methodIndex(up) != otherMethod {
					hint = fmt.Sprintf(" (methods are case-sensitive: %s)", up)
				}
				d.errorf(sc, it.Line, f, "unknown HTTP method %q%s; one of %s", name, hint, strings.Join(methodNames[:], ", "))
				ok = false
				continue
			}
			if mask&(1<<idx) != 0 {
				d.errorf(sc, it.Line, f, "duplicate method %s", name)
				ok = false
				continue
			}
			mask |= 1 << idx
		}
		if !ok {
			return false
		}
		s.methods = mask
		for i, name := range methodNames {
			if mask&(1<<i) != 0 {
				s.Methods = append(s.Methods, name)
			}
		}
		s.KeyMethod = strings.Join(s.Methods, ",")
	}
	return ok
}

func (d *decoder) grpcMethods(n *yaml.Node, sc scope, s *SLA) bool {
	items := d.seq(n, sc, "grpcMethods")
	if items == nil {
		return false
	}
	if len(items) == 0 {
		d.errorf(sc, n.Line, "grpcMethods", "empty list: name at least one method, or \"*\" for all")
		return false
	}
	ok := true
	seen := map[string]int{}
	for i, it := range items {
		f := fmt.Sprintf("grpcMethods[%d]", i)
		src, sok := d.str(it, sc, f)
		if !sok {
			ok = false
			continue
		}
		g, err := compileGRPCPattern(src)
		if err != nil {
			d.errorf(sc, it.Line, f, "invalid gRPC method pattern: %v", err)
			ok = false
			continue
		}
		if first, dup := seen[src]; dup {
			d.errorf(sc, it.Line, f, "duplicate %q (first at line %d)", src, first)
			ok = false
			continue
		}
		seen[src] = it.Line
		s.grpc = append(s.grpc, g)
		s.GRPCMethods = append(s.GRPCMethods, src)
	}
	if !ok {
		return false
	}
	sort.Strings(s.GRPCMethods)
	s.Endpoint = strings.Join(s.GRPCMethods, ",")
	s.KeyMethod = "GRPC"
	return true
}

// bindTenant resolves the SLA's tenant source (explicit, from defaults, or
// inferred from the only path variable) and checks it fits the SLA. It
// reports whether s.Tenant is set.
func (d *decoder) bindTenant(s *SLA, spec tenantSpec, sc scope) bool {
	field := "tenant"
	where := ""
	if spec.fromDefaults {
		where = " (from defaults at line " + strconv.Itoa(spec.line) + ")"
	}
	if spec.set && !spec.valid {
		return false // already reported
	}
	t := TenantSource{Kind: spec.kind, Name: spec.name, Key: spec.name, Index: -1, Line: spec.line}
	errLine := spec.line
	if spec.fromDefaults || errLine == 0 {
		// Report at the SLA: that is where the mismatch must be fixed.
		errLine = s.Line
	}
	switch t.Kind {
	case TenantNone:
		if spec.explicitNone {
			if s.NoTenant != NoTenantShared {
				d.errorf(sc, errLine, field, "none%s with noTenant: reject would reject every request; set noTenant: shared for one bucket shared by all callers", where)
				return false
			}
			break
		}
		if !s.IsGRPC() && len(s.Pattern.Names()) == 1 {
			name := s.Pattern.Names()[0]
			t = TenantSource{Kind: TenantPath, Name: name, Key: name, Index: 0, Inferred: true}
			break
		}
		if s.NoTenant == NoTenantShared {
			break // one bucket for everyone: a global limit
		}
		hint := ""
		if !s.IsGRPC() && len(s.Pattern.Names()) > 1 {
			hint = fmt.Sprintf("; the pattern has several variables (%s), so none is taken by default", strings.Join(s.Pattern.Names(), ", "))
		}
		d.errorf(sc, s.Line, field, "not set%s: set tenant ({fromPath: var}, {header: name}, {metadata: key} or {func: name}) here or in defaults, or tenant: none with noTenant: shared for one bucket shared by all callers", hint)
		return false
	case TenantPath:
		if s.IsGRPC() {
			d.errorf(sc, errLine, field+".fromPath", "a gRPC SLA has no path%s; use metadata or func", where)
			return false
		}
		t.Index = s.Pattern.Index(t.Name)
		if t.Index < 0 {
			d.errorf(sc, errLine, field+".fromPath", "pattern %q has no variable {%s}%s", s.Pattern.String(), t.Name, where)
			return false
		}
	case TenantHeader:
		if s.IsGRPC() {
			t.Key = strings.ToLower(t.Name)
			if msg := checkMetadataKey(t.Key); msg != "" {
				d.errorf(sc, errLine, field+".header", "header %q cannot be used as gRPC metadata key: %s%s", t.Name, msg, where)
				return false
			}
		} else {
			t.Key = textproto.CanonicalMIMEHeaderKey(t.Name)
		}
	case TenantMetadata:
		if !s.IsGRPC() {
			d.errorf(sc, errLine, field+".metadata", "metadata is for gRPC SLAs; use header for an HTTP SLA%s", where)
			return false
		}
	}
	s.Tenant = t
	return true
}

func (d *decoder) tiers(n *yaml.Node, sc scope, field string, defAlg Algorithm) []Tier {
	items := d.seq(n, sc, field)
	if items == nil {
		return nil
	}
	if len(items) == 0 {
		d.errorf(sc, n.Line, field, "no tiers: define at least one {period, threshold}")
		return nil
	}
	if len(items) > maxTiers {
		d.errorf(sc, n.Line, field, "%d tiers, at most %d allowed", len(items), maxTiers)
		return nil
	}
	out := make([]Tier, 0, len(items))
	periods := map[time.Duration]int{} // period -> tier index
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		m, unknown := d.mapping(it, sc, f, "period", "threshold", "algorithm")
		if m == nil {
			continue
		}
		t := Tier{Algorithm: defAlg, Line: it.Line}
		ok := true
		if kv, has := m["period"]; has {
			p, pok := d.period(kv.val, sc, f+".period")
			if pok {
				if j, dup := periods[p]; dup {
					d.errorf(sc, kv.val.Line, f+".period", "duplicate period %v (also %s[%d]); tiers of one SLA need distinct periods", p, field, j)
					pok = false
				} else {
					periods[p] = i
				}
			}
			t.Period, ok = p, ok && pok
		} else {
			if !unknown {
				d.errorf(sc, it.Line, f+".period", "required")
			}
			ok = false
		}
		if kv, has := m["threshold"]; has {
			v, vok := d.integer(kv.val, sc, f+".threshold")
			switch {
			case !vok:
				ok = false
			case v < 0:
				d.errorf(sc, kv.val.Line, f+".threshold", "must be >= 0, got %s", kv.val.Value)
				ok = false
			case v > maxThreshold:
				d.errorf(sc, kv.val.Line, f+".threshold", "must be <= %d, got %s", int64(maxThreshold), kv.val.Value)
				ok = false
			}
			t.Threshold = v
		} else {
			if !unknown {
				d.errorf(sc, it.Line, f+".threshold", "required")
			}
			ok = false
		}
		if kv, has := m["algorithm"]; has {
			v, aok := d.enum(kv.val, sc, f+".algorithm", "fixed", "sliding")
			t.Algorithm, ok = Algorithm(v), ok && aok
		}
		if ok {
			out = append(out, t)
		}
	}
	return out
}

// period accepts a whole number of seconds (10) or a Go duration string
// ("500ms", "1m30s").
func (d *decoder) period(n *yaml.Node, sc scope, field string) (time.Duration, bool) {
	if n == nil || n.Kind != yaml.ScalarNode {
		d.errorf(sc, line(n), field, "must be %s, got %s", periodFieldUnits, describe(n))
		return 0, false
	}
	if n.ShortTag() == "!!str" {
		p, err := time.ParseDuration(n.Value)
		switch {
		case err != nil:
			d.errorf(sc, n.Line, field, "must be %s, got %q", periodFieldUnits, n.Value)
		case p <= 0:
			d.errorf(sc, n.Line, field, "must be > 0, got %q", n.Value)
		case p > maxPeriod:
			d.errorf(sc, n.Line, field, "must be at most 1 year (8760h), got %q", n.Value)
		case p%time.Millisecond != 0:
			d.errorf(sc, n.Line, field, "must be a whole number of milliseconds, got %q", n.Value)
		default:
			return p, true
		}
		return 0, false
	}
	if t := n.ShortTag(); t != "!!int" && t != "!!float" {
		d.errorf(sc, n.Line, field, "must be %s, got %s", periodFieldUnits, describe(n))
		return 0, false
	}
	v, ok := d.integer(n, sc, field)
	switch {
	case !ok:
		return 0, false
	case v <= 0:
		d.errorf(sc, n.Line, field, "must be > 0, got %s", n.Value)
	case v > int64(maxPeriod/time.Second):
		d.errorf(sc, n.Line, field, "must be at most 1 year (%d seconds), got %s", int64(maxPeriod/time.Second), n.Value)
	default:
		return time.Duration(v) * time.Second, true
	}
	return 0, false
}

// overrides decodes the overrides list. tenantBound says whether the SLA's
// tenant source was bound (so TenantNone means a deliberate global bucket).
func (d *decoder) overrides(n *yaml.Node, sc scope, s *SLA, defAlg Algorithm, tenantBound bool, costLine int) {
	items := d.seq(n, sc, "overrides")
	if items == nil {
		return
	}
	if tenantBound && s.Tenant.Kind == TenantNone {
		d.errorf(sc, n.Line, "overrides", "the SLA has no tenant source (one bucket shared by all callers), so no override can apply")
		return
	}
	tenants := map[string]int{} // tenant -> line
	for i, it := range items {
		f := fmt.Sprintf("overrides[%d]", i)
		m, unknown := d.mapping(it, sc, f, "tenants", "tiers")
		if m == nil {
			continue
		}
		var names []string
		if kv, ok := m["tenants"]; ok {
			list := d.seq(kv.val, sc, f+".tenants")
			if list != nil && len(list) == 0 {
				d.errorf(sc, kv.val.Line, f+".tenants", "empty list: name at least one tenant")
			}
			for j, tn := range list {
				tf := fmt.Sprintf("%s.tenants[%d]", f, j)
				name, ok := d.str(tn, sc, tf)
				if !ok {
					continue
				}
				switch {
				case name == "":
					d.errorf(sc, tn.Line, tf, "empty tenant id")
				case checkTenant(name) != tenantOK:
					d.errorf(sc, tn.Line, tf, "tenant id %s: the filter refuses such a tenant, so the override could never apply", checkTenant(name).reason())
				default:
					if first, dup := tenants[name]; dup {
						d.errorf(sc, tn.Line, tf, "tenant %q already has an override (line %d)", name, first)
						continue
					}
					tenants[name] = tn.Line
					names = append(names, name)
				}
			}
		} else if !unknown {
			d.errorf(sc, it.Line, f+".tenants", "required: the tenants this override applies to")
		}
		var tiers []Tier
		if kv, ok := m["tiers"]; ok {
			tiers = d.tiers(kv.val, sc, f+".tiers", defAlg)
		} else if !unknown {
			d.errorf(sc, it.Line, f+".tiers", "required: the tiers that replace the SLA's tiers for these tenants")
		}
		if len(tiers) == 0 {
			continue
		}
		d.checkCost(s, sc, tiers, f+".tiers", costLine)
		s.overrides = append(s.overrides, override{field: f, tiers: tiers})
		if s.Overrides == nil {
			s.Overrides = map[string][]Tier{}
		}
		for _, name := range names {
			s.Overrides[name] = tiers
		}
	}
}

// checkCost rejects a cost that every request would exceed: a tier whose
// threshold is positive but below the cost denies everything, which is
// surely a mistake (threshold 0 is the explicit way to deny everything).
func (d *decoder) checkCost(s *SLA, sc scope, tiers []Tier, field string, costLine int) {
	for i, t := range tiers {
		if t.Threshold > 0 && t.Threshold < s.Cost {
			origin := "defaults.cost"
			if costLine > 0 {
				origin = fmt.Sprintf("cost (line %d)", costLine)
			}
			d.errorf(sc, t.Line, fmt.Sprintf("%s[%d].threshold", field, i),
				"%d is less than the cost of one request, %d from %s: every request would be denied (threshold 0 denies all explicitly)",
				t.Threshold, s.Cost, origin)
		}
	}
}

// checkKeyCollisions rejects two enabled SLAs that would count in the same
// counters: counter keys are (tenant, Endpoint, KeyMethod, period), so two
// SLAs with the same endpoint, method set and a common period would charge
// one counter twice per request.
func (d *decoder) checkKeyCollisions(slas []SLA) {
	type owner struct {
		id   string
		line int
	}
	seen := map[string]owner{}
	for i := range slas {
		s := &slas[i]
		if !s.Enabled || s.Endpoint == "" {
			continue
		}
		sc := scope{sla: s.ID, idx: s.index}
		periods := map[time.Duration]bool{}
		report := func(t Tier, field string) {
			if periods[t.Period] {
				return // overrides reuse base periods on purpose
			}
			periods[t.Period] = true
			k := s.Endpoint + "\x00" + s.KeyMethod + "\x00" + strconv.FormatInt(int64(t.Period), 10)
			if o, dup := seen[k]; dup && o.id != s.ID {
				d.errorf(sc, t.Line, field,
					"sla %q (line %d) already counts %s %s per %v: the two would share one counter; change the pattern, methods or period, or disable one",
					o.id, o.line, s.KeyMethod, s.Endpoint, t.Period)
				return
			}
			seen[k] = owner{s.ID, s.Line}
		}
		for j, t := range s.Tiers {
			report(t, fmt.Sprintf("tiers[%d].period", j))
		}
		for _, o := range s.overrides {
			for j, t := range o.tiers {
				report(t, fmt.Sprintf("%s.tiers[%d].period", o.field, j))
			}
		}
	}
}
