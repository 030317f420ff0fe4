package gossip

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func TestValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Name = "a"
	ok.GRPCAddr = "127.0.0.1:7070"
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}

	tests := []struct {
		field string
		mod   func(*Config)
	}{
		{"Name", func(c *Config) { c.Name = "" }},
		{"BindAddr", func(c *Config) { c.BindAddr = "localhost" }},
		{"BindPort", func(c *Config) { c.BindPort = 70000 }},
		{"AdvertiseAddr", func(c *Config) { c.AdvertiseAddr = "nope" }},
		{"AdvertisePort", func(c *Config) { c.AdvertisePort = -1 }},
		{"AdvertisePort", func(c *Config) {
			c.Transport = fakeTransport{}
			c.AdvertiseAddr = "10.0.0.1"
		}},
		{"Seeds[1]", func(c *Config) { c.Seeds = []string{"127.0.0.1:1", "127.0.0.1"} }},
		{"GRPCAddr", func(c *Config) { c.GRPCAddr = "" }},
		{"GRPCAddr", func(c *Config) { c.GRPCAddr = "127.0.0.1:http" }},
		{"GRPCAddr", func(c *Config) { c.GRPCAddr = ":0" }},
		{"JoinTimeout", func(c *Config) { c.JoinTimeout = -time.Second }},
		{"JoinTimeout", func(c *Config) { c.Seeds, c.JoinTimeout = nil, time.Second }},
		{"GRPCAddr", func(c *Config) { c.GRPCAddr = strings.Repeat("h", 300) + ":1" }},
		{"Profile", func(c *Config) { c.Profile = Profile(7) }},
		{"SecretKeys[0]", func(c *Config) { c.SecretKeys = [][]byte{make([]byte, 15)} }},
		{"Label", func(c *Config) { c.Label = strings.Repeat("l", 256) }},
		{"RejoinInterval", func(c *Config) { c.RejoinInterval = -time.Second }},
		{"RejoinForget", func(c *Config) { c.RejoinForget = -time.Second }},
		{"RejoinMax", func(c *Config) { c.RejoinMax = -1 }},
	}
	for _, tt := range tests {
		c := ok
		tt.mod(&c)
		err := c.Validate()
		if err == nil {
			t.Errorf("%s: invalid config accepted", tt.field)
			continue
		}
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: error %v does not wrap ErrInvalidConfig", tt.field, err)
		}
		if !strings.Contains(err.Error(), "Config."+tt.field+":") {
			t.Errorf("%s: error %q does not name the field", tt.field, err)
		}
		if _, err := New(c); err == nil {
			t.Errorf("%s: New accepted an invalid config", tt.field)
		}
	}
}

func TestDefaultsApplied(t *testing.T) {
	c := Config{Name: "a", GRPCAddr: "127.0.0.1:1", Profile: ProfileLocal}
	d := c.withDefaults()
	if d.BindAddr != "0.0.0.0" || d.RejoinInterval != DefaultRejoinIntervalLocal ||
		d.RejoinForget != DefaultRejoinForget || d.RejoinMax != DefaultRejoinMax || d.Logger == nil {
		t.Fatalf("defaults not applied: %+v", d)
	}
	c.Profile = ProfileLAN
	if got := c.withDefaults().RejoinInterval; got != DefaultRejoinIntervalLAN {
		t.Fatalf("LAN rejoin interval = %v", got)
	}
	// New copies keys and seeds: the caller may reuse its slices.
	key := []byte("0123456789abcdef")
	c.SecretKeys = [][]byte{key}
	c.Seeds = []string{"127.0.0.1:1"}
	g, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	key[0] = 'X'
	c.Seeds[0] = "mutated:1"
	if g.cfg.SecretKeys[0][0] != '0' || g.cfg.Seeds[0] != "127.0.0.1:1" {
		t.Fatal("New kept references to the caller's slices")
	}
}

// fakeTransport only satisfies the interface for Validate.
type fakeTransport struct{ memberlist.Transport }
