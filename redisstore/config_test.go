package redisstore

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfigValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	if c.KeyPrefix != "peerlimit:" || c.Timeout != 100*time.Millisecond || c.Grace != 2*time.Second {
		t.Fatalf("DefaultConfig() = %+v, want prefix peerlimit:, Timeout 100ms, Grace 2s", c)
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		field string
		edit  func(c *Config)
	}{
		{"Addr", func(c *Config) { c.Addr = "" }},
		{"Addr", func(c *Config) { c.Addr = "localhost" }},
		{"Addr", func(c *Config) { c.Addr = "localhost:" }},
		{"DB", func(c *Config) { c.DB = -1 }},
		{"KeyPrefix", func(c *Config) { c.KeyPrefix = strings.Repeat("p", 257) }},
		{"Timeout", func(c *Config) { c.Timeout = 0 }},
		{"Timeout", func(c *Config) { c.Timeout = time.Microsecond }},
		{"Timeout", func(c *Config) { c.Timeout = 2 * time.Minute }},
		{"Grace", func(c *Config) { c.Grace = -time.Second }},
		{"Grace", func(c *Config) { c.Grace = 25 * time.Hour }},
		{"PoolSize", func(c *Config) { c.PoolSize = -1 }},
	}
	for _, tc := range cases {
		c := DefaultConfig()
		tc.edit(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), ": "+tc.field+": ") {
			t.Errorf("%+v: Validate() = %v, want ErrInvalidConfig naming %s", c, err, tc.field)
		}
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", c, err)
		}
		if _, err := NewPerRequest(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewPerRequest(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}

	ok := DefaultConfig()
	ok.KeyPrefix, ok.Grace, ok.Addr = "", 0, "[::1]:6380"
	if err := ok.Validate(); err != nil {
		t.Errorf("empty prefix, zero grace, IPv6 address: %v", err)
	}
}
