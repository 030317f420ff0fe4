// Package rls answers Envoy's rate limit service API
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) from a
// peerlimit node, with limits written in envoyproxy/ratelimit's own
// configuration format: a gateway (Envoy, Istio, Contour, Emissary, Gloo)
// that calls envoy ratelimit today can call a peerlimit cluster instead,
// with no Redis behind it.
//
// Supported in the configuration: domain; descriptors nested to any depth
// with key and value (an empty value matches any value, and each value gets
// its own counter, as in envoy ratelimit; a configured value wins over the
// empty one); rate_limit with unit (second, minute, hour or day),
// requests_per_unit, unlimited, name and replaces; shadow_mode.
// detailed_metric and value_to_metric are accepted and change nothing (they
// shape envoy ratelimit's statsd metrics). Refused with an error that names
// the file, line and field: share_threshold, wildcard values (ending in
// "*"), and units other than the four.
package rls

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
)

// Config is a set of domains, each with its descriptor tree. A Config is
// immutable once loaded.
type Config struct {
	domains map[string]*Descriptor // the root of each domain: no key, children only
}

// Descriptor is one node of a domain's descriptor tree.
type Descriptor struct {
	Key, Value string
	// Limit is the rate limit of a request whose descriptor ends here; nil:
	// none (the descriptor only leads to nested ones, or is whitelisted).
	Limit *Limit
	// Shadow says a request over this limit is still answered OK.
	Shadow bool

	exact    map[string]*Descriptor // children by key and value ("key\x00value")
	anyValue map[string]*Descriptor // children by key, for any value
}

// Limit is a descriptor's rate_limit.
type Limit struct {
	Name            string
	Unit            rlsv3.RateLimitResponse_RateLimit_Unit
	Period          time.Duration
	RequestsPerUnit uint32
	// Unlimited says every request is admitted, without counting.
	Unlimited bool
	// Replaces names the limits this one replaces: when a request matches
	// both, only this one is applied, and the replaced one is neither
	// checked nor counted (envoy ratelimit's replaces).
	Replaces []string
}

// ConfigError is one error in a configuration file.
type ConfigError struct {
	File  string
	Line  int    // 1-based; 0 when unknown
	Field string // dotted path, e.g. "descriptors[0].rate_limit.unit"
	Msg   string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// maxFileBytes bounds a configuration file.
const maxFileBytes = 4 << 20

// maxErrors bounds the errors reported for one file.
const maxErrors = 20

var units = map[string]struct {
	unit   rlsv3.RateLimitResponse_RateLimit_Unit
	period time.Duration
}{
	"second": {rlsv3.RateLimitResponse_RateLimit_SECOND, time.Second},
	"minute": {rlsv3.RateLimitResponse_RateLimit_MINUTE, time.Minute},
	"hour":   {rlsv3.RateLimitResponse_RateLimit_HOUR, time.Hour},
	"day":    {rlsv3.RateLimitResponse_RateLimit_DAY, 24 * time.Hour},
}

// LoadDir loads every *.yaml and *.yml file of dir (envoy ratelimit's
// runtime directory layout: one domain per file), in name order. A domain
// defined twice is an error.
func LoadDir(dir string) (*Config, error) {
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("rls: no *.yaml or *.yml file in %s", dir)
	}
	return LoadFiles(files...)
}

// LoadFiles loads the given configuration files into one Config.
func LoadFiles(paths ...string) (*Config, error) {
	cfg := &Config{domains: map[string]*Descriptor{}}
	var errs []error
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("rls: %w", err))
			continue
		}
		if fi.Size() > maxFileBytes {
			errs = append(errs, &ConfigError{File: p, Msg: fmt.Sprintf("file is %d bytes, more than %d", fi.Size(), maxFileBytes)})
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("rls: %w", err))
			continue
		}
		if err := cfg.add(p, data); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// Parse parses one configuration file's content; name is used in errors.
func Parse(name string, data []byte) (*Config, error) {
	if len(data) > maxFileBytes {
		return nil, &ConfigError{File: name, Msg: fmt.Sprintf("file is %d bytes, more than %d", len(data), maxFileBytes)}
	}
	cfg := &Config{domains: map[string]*Descriptor{}}
	if err := cfg.add(name, data); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Domains returns the domain names, sorted.
func (c *Config) Domains() []string {
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.domains))
	for d := range c.domains {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// parser collects the errors of one file.
type parser struct {
	file string
	errs []error
}

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	if len(p.errs) == maxErrors {
		p.errs = append(p.errs, &ConfigError{File: p.file, Msg: "more errors follow; fix these first"})
	}
	if len(p.errs) > maxErrors {
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	p.errs = append(p.errs, &ConfigError{File: p.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (c *Config) add(name string, data []byte) error {
	p := &parser{file: name}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return &ConfigError{File: name, Msg: err.Error()}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return &ConfigError{File: name, Line: 1, Msg: "want a mapping with domain and descriptors"}
	}
	top := doc.Content[0]
	var domain string
	var domainNode *yaml.Node
	root := &Descriptor{}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		switch k.Value {
		case "domain":
			domainNode = v
			domain = p.str(v, "domain")
		case "descriptors":
			p.children(root, v, "descriptors")
		default:
			p.errorf(k, k.Value, "unknown field (want domain, descriptors)")
		}
	}
	switch {
	case domainNode == nil:
		p.errorf(top, "domain", "required")
	case domain == "":
		p.errorf(domainNode, "domain", "must not be empty")
	case c.domains[domain] != nil:
		p.errorf(domainNode, "domain", "%q is defined twice", domain)
	}
	if len(p.errs) > 0 {
		return errors.Join(p.errs...)
	}
	c.domains[domain] = root
	return nil
}

func (p *parser) str(n *yaml.Node, field string) string {
	if n.Kind != yaml.ScalarNode {
		p.errorf(n, field, "want a string")
		return ""
	}
	return n.Value
}

func (p *parser) boolean(n *yaml.Node, field string) bool {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		p.errorf(n, field, "want true or false, got %q", n.Value)
	}
	return b
}

func (p *parser) children(parent *Descriptor, n *yaml.Node, field string) {
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, field, "want a list of descriptors")
		return
	}
	for i, dn := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		d := p.descriptor(dn, f)
		if d == nil {
			continue
		}
		if d.Value == "" {
			if parent.anyValue[d.Key] != nil {
				p.errorf(dn, f, "key %q without a value is defined twice at this level", d.Key)
				continue
			}
			if parent.anyValue == nil {
				parent.anyValue = map[string]*Descriptor{}
			}
			parent.anyValue[d.Key] = d
			continue
		}
		kv := d.Key + "\x00" + d.Value
		if parent.exact[kv] != nil {
			p.errorf(dn, f, "key %q with value %q is defined twice at this level", d.Key, d.Value)
			continue
		}
		if parent.exact == nil {
			parent.exact = map[string]*Descriptor{}
		}
		parent.exact[kv] = d
	}
}

func (p *parser) descriptor(n *yaml.Node, field string) *Descriptor {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, field, "want a mapping with key, value, rate_limit, descriptors")
		return nil
	}
	d := &Descriptor{}
	hasKey := false
	eachField(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "key":
			hasKey = true
			d.Key = p.str(v, f)
		case "value":
			d.Value = p.str(v, f)
			if strings.HasSuffix(d.Value, "*") {
				p.errorf(v, f, "wildcard values (ending in *) are not supported by peerlimit yet")
			}
		case "rate_limit":
			d.Limit = p.limit(v, f)
		case "shadow_mode":
			d.Shadow = p.boolean(v, f)
		case "detailed_metric", "value_to_metric":
			p.boolean(v, f) // statsd metric shape in envoy ratelimit: nothing to do here
		case "share_threshold":
			if p.boolean(v, f) {
				p.errorf(v, f, "not supported by peerlimit yet (it goes with wildcard values)")
			}
		case "descriptors":
			p.children(d, v, f)
		default:
			p.errorf(k, f, "unknown field (want key, value, rate_limit, shadow_mode, descriptors)")
		}
	})
	if !hasKey || d.Key == "" {
		p.errorf(n, field+".key", "required")
		return nil
	}
	return d
}

func (p *parser) limit(n *yaml.Node, field string) *Limit {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, field, "want a mapping with unit and requests_per_unit")
		return nil
	}
	l := &Limit{}
	var unitNode, rpuNode *yaml.Node
	eachField(n, field, func(k, v *yaml.Node, f string) {
		switch k.Value {
		case "unit":
			unitNode = v
			u, ok := units[strings.ToLower(p.str(v, f))]
			if !ok {
				p.errorf(v, f, "%q is not a unit peerlimit supports (second, minute, hour, day)", v.Value)
			}
			l.Unit, l.Period = u.unit, u.period
		case "requests_per_unit":
			rpuNode = v
			if v.Kind != yaml.ScalarNode || v.Decode(&l.RequestsPerUnit) != nil {
				p.errorf(v, f, "want a whole number from 0 to %d, got %q", uint32(1<<32-1), v.Value)
			}
		case "unlimited":
			l.Unlimited = p.boolean(v, f)
		case "name":
			l.Name = p.str(v, f)
		case "replaces":
			l.Replaces = p.replaces(v, f)
		default:
			p.errorf(k, f, "unknown field (want unit, requests_per_unit, unlimited, name, replaces)")
		}
	})
	if !l.Unlimited {
		if unitNode == nil {
			p.errorf(n, field+".unit", "required")
		}
		if rpuNode == nil {
			p.errorf(n, field+".requests_per_unit", "required")
		}
	}
	return l
}

// replaces parses a limit's replaces: a list of {name: N}, each name set.
func (p *parser) replaces(n *yaml.Node, field string) []string {
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, field, "want a list of {name: ...}")
		return nil
	}
	var names []string
	for i, item := range n.Content {
		f := fmt.Sprintf("%s[%d]", field, i)
		if item.Kind != yaml.MappingNode {
			p.errorf(item, f, "want a mapping with name")
			continue
		}
		name := ""
		eachField(item, f, func(k, v *yaml.Node, kf string) {
			if k.Value != "name" {
				p.errorf(k, kf, "unknown field (want name)")
				return
			}
			name = p.str(v, kf)
		})
		if name == "" {
			p.errorf(item, f+".name", "required, and not empty")
			continue
		}
		names = append(names, name)
	}
	return names
}

// eachField calls fn with every key and value of the mapping n, and the
// value's field path (field.key).
func eachField(n *yaml.Node, field string, fn func(k, v *yaml.Node, f string)) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		fn(k, n.Content[i+1], field+"."+k.Value)
	}
}

// Entry is one key and value of a request's descriptor.
type Entry struct{ Key, Value string }

// Lookup walks domain's tree along entries, as envoy ratelimit does: at
// each level the child with the entry's key and value, or else the one
// with its key and no value. It returns the descriptor reached after the
// last entry, or nil if an entry matches nothing or the domain is unknown.
func (c *Config) Lookup(domain string, entries []Entry) *Descriptor {
	d := c.domains[domain]
	if d == nil || len(entries) == 0 {
		return nil
	}
	for _, e := range entries {
		next := d.exact[e.Key+"\x00"+e.Value]
		if next == nil {
			next = d.anyValue[e.Key]
		}
		if next == nil {
			return nil
		}
		d = next
	}
	return d
}
