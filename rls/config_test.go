package rls

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
)

// An envoy ratelimit configuration as its README writes them: a default
// per key, a more specific value, nesting, shadow mode and unlimited.
const exampleConfig = `# envoy ratelimit's format, unchanged
domain: edge
descriptors:
  - key: tenant
    rate_limit:
      unit: minute
      requests_per_unit: 10
    descriptors:
      - key: path
        value: /export
        rate_limit:
          name: export
          unit: hour
          requests_per_unit: 2
  - key: tenant
    value: vip
    rate_limit:
      unlimited: true
  - key: remote_address
    shadow_mode: true
    detailed_metric: true
    rate_limit:
      unit: SECOND
      requests_per_unit: 5
  - key: database
    value: users
`

func TestParseAndLookup(t *testing.T) {
	cfg, err := Parse("edge.yaml", []byte(exampleConfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		domain  string
		entries []Entry
		want    *Limit // nil: no descriptor reached
		reached bool
		shadow  bool
	}{
		{"any tenant", "edge", []Entry{{"tenant", "acme"}}, &Limit{Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, Period: time.Minute, RequestsPerUnit: 10}, true, false},
		{"a value wins over the default", "edge", []Entry{{"tenant", "vip"}}, &Limit{Unlimited: true}, true, false},
		{"nested", "edge", []Entry{{"tenant", "acme"}, {"path", "/export"}}, &Limit{Name: "export", Unit: rlsv3.RateLimitResponse_RateLimit_HOUR, Period: time.Hour, RequestsPerUnit: 2}, true, false},
		{"nested value unknown", "edge", []Entry{{"tenant", "acme"}, {"path", "/other"}}, nil, false, false},
		{"shadow, upper-case unit", "edge", []Entry{{"remote_address", "10.0.0.1"}}, &Limit{Unit: rlsv3.RateLimitResponse_RateLimit_SECOND, Period: time.Second, RequestsPerUnit: 5}, true, true},
		{"whitelisted", "edge", []Entry{{"database", "users"}}, nil, true, false},
		{"unknown key", "edge", []Entry{{"user", "x"}}, nil, false, false},
		{"unknown domain", "other", []Entry{{"tenant", "acme"}}, nil, false, false},
	} {
		d := cfg.Lookup(tc.domain, tc.entries)
		if (d != nil) != tc.reached {
			t.Errorf("%s: reached %v, want %v", tc.name, d != nil, tc.reached)
			continue
		}
		if d == nil {
			continue
		}
		if (d.Limit == nil) != (tc.want == nil) || (d.Limit != nil && !reflect.DeepEqual(d.Limit, tc.want)) || d.Shadow != tc.shadow {
			t.Errorf("%s: limit %+v shadow %v, want %+v shadow %v", tc.name, d.Limit, d.Shadow, tc.want, tc.shadow)
		}
	}
}

// TestParseErrors: every mistake is named with its file, line and field,
// and what peerlimit does not support is refused, not ignored.
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want string
	}{
		{"descriptors: []\n", "x.yaml:1: domain: required"},
		{"domain: ''\n", "x.yaml:1: domain: must not be empty"},
		{"domain: a\nfoo: 1\n", "x.yaml:2: foo: unknown field"},
		{"domain: a\ndescriptors:\n  - value: v\n", "x.yaml:3: descriptors[0].key: required"},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n", `x.yaml:4: descriptors[0].rate_limit.unit: "fortnight" is not a unit`},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n", "x.yaml:4: descriptors[0].rate_limit.requests_per_unit: want a whole number"},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second}\n", "x.yaml:4: descriptors[0].rate_limit.requests_per_unit: required"},
		{"domain: a\ndescriptors:\n  - key: k\n    value: files*\n", "x.yaml:4: descriptors[0].value: wildcard values"},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces: [{name: ''}]\n", "x.yaml:7: descriptors[0].rate_limit.replaces[0].name: required"},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces: [{nom: x}]\n", "x.yaml:7: descriptors[0].rate_limit.replaces[0].nom: unknown field"},
		{"domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces: x\n", "x.yaml:7: descriptors[0].rate_limit.replaces: want a list"},
		{"domain: a\ndescriptors:\n  - key: k\n  - key: k\n", `x.yaml:4: descriptors[1]: key "k" without a value is defined twice`},
		{"domain: a\ndescriptors:\n  - key: k\n    descriptors:\n      - key: j\n        shadow_mode: maybe\n", `x.yaml:6: descriptors[0].descriptors[0].shadow_mode: want true or false, got "maybe"`},
		{"domain: [a\n", "x.yaml: yaml:"},
	} {
		_, err := Parse("x.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got  %v\n want %s", tc.yaml, err, tc.want)
		}
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("edge.yaml", exampleConfig)
	write("db.yml", "domain: db\ndescriptors:\n  - key: database\n    rate_limit: {unit: second, requests_per_unit: 100}\n")
	write("notes.txt", "not a config")
	cfg, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Domains(), ","); got != "db,edge" {
		t.Fatalf("domains %s, want db,edge", got)
	}
	write("again.yaml", "domain: db\n")
	if _, err := LoadDir(dir); err == nil || !strings.Contains(err.Error(), `again.yaml:1: domain: "db" is defined twice`) &&
		!strings.Contains(err.Error(), `db.yml:1: domain: "db" is defined twice`) {
		t.Fatalf("a domain twice: %v", err)
	}
}

// TestKubernetesExampleConfig: the limits in the example manifest load.
func TestKubernetesExampleConfig(t *testing.T) {
	data, err := os.ReadFile("../deploy/kubernetes/peerlimit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	found := false
	for {
		var doc struct {
			Kind string            `yaml:"kind"`
			Data map[string]string `yaml:"data"`
		}
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if doc.Kind != "ConfigMap" {
			continue
		}
		for name, content := range doc.Data {
			if _, err := Parse(name, []byte(content)); err != nil {
				t.Errorf("the example's %s: %v", name, err)
			}
			found = true
		}
	}
	if !found {
		t.Fatal("no ConfigMap with limits in the example manifest")
	}
}
