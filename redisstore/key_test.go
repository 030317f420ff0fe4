package redisstore

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// splitKey undoes appendKey: it splits on unescaped "|" and unescapes.
func splitKey(t testing.TB, key, prefix string) []string {
	t.Helper()
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		t.Fatalf("key %q lacks prefix %q", key, prefix)
	}
	var fields []string
	var cur []byte
	for i := 0; i < len(rest); i++ {
		switch c := rest[i]; c {
		case '\\':
			if i+1 == len(rest) {
				t.Fatalf("key %q ends in a lone escape", key)
			}
			i++
			cur = append(cur, rest[i])
		case '|':
			fields = append(fields, string(cur))
			cur = cur[:0]
		default:
			cur = append(cur, c)
		}
	}
	return append(fields, string(cur))
}

func TestKeyExamples(t *testing.T) {
	cases := []struct {
		tenant, endpoint, method string
		want                     string
	}{
		{"acme", "/product/*", "GET", `p:w|acme|/product/*|GET|10000|1627318770000`},
		{"a|b", "c", "", `p:w|a\|b|c||10000|1627318770000`},
		{`a\`, "|c", "", `p:w|a\\|\|c||10000|1627318770000`},
		{"", "", "", `p:w||||10000|1627318770000`},
	}
	for _, c := range cases {
		got := string(appendKey(nil, "p:", kindWindow, c.tenant, c.endpoint, c.method, 10000, 1627318770000))
		if got != c.want {
			t.Errorf("key(%q, %q, %q) = %s, want %s", c.tenant, c.endpoint, c.method, got, c.want)
		}
	}
}

// FuzzKeyInjective checks that a key decodes back to exactly the fields it
// was built from, so distinct series can never share a key, and that keyLen
// predicts its length.
func FuzzKeyInjective(f *testing.F) {
	f.Add("acme", "/product/*", "GET", int64(10000), int64(1627318770000))
	f.Add("a|b", "c", "", int64(1), int64(-5))
	f.Add(`a\`, `|c\\|`, `\`, int64(math.MaxInt64), int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, tenant, endpoint, method string, period, start int64) {
		key := string(appendKey(nil, "pfx:", kindRequest, tenant, endpoint, method, period, start))
		if n := keyLen("pfx:", kindRequest, tenant, endpoint, method, period, start); n != len(key) {
			t.Fatalf("keyLen = %d, len(key) = %d for %q", n, len(key), key)
		}
		got := splitKey(t, key, "pfx:")
		want := []string{kindRequest, tenant, endpoint, method, strconv.FormatInt(period, 10), strconv.FormatInt(start, 10)}
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
			t.Fatalf("key %q splits into %q, want %q", key, got, want)
		}
	})
}

func TestOriginField(t *testing.T) {
	if a, b := originField("c/7", 1), originField("c", 71); a == b {
		t.Fatalf("originField collision: %q", a)
	}
	if got := originField("node-1", 42); got != "node-1/42" {
		t.Fatalf("originField = %q", got)
	}
}
