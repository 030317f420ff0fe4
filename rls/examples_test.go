package rls

import (
	"testing"
)

// TestExampleConfig: the example configuration directory loads, with every
// kind of rule it shows.
func TestExampleConfig(t *testing.T) {
	cfg, err := LoadDir("../examples/envoy")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Domains(); len(got) != 1 || got[0] != "gateway" {
		t.Fatalf("domains %v, want [gateway]", got)
	}
}
