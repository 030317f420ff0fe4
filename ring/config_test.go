package ring

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v, want nil", err)
	}
	want := Config{PartitionCount: 1021, ReplicationFactor: 20, Load: 1.25}
	if cfg != want {
		t.Fatalf("DefaultConfig() = %+v, want %+v", cfg, want)
	}
}

func TestValidate(t *testing.T) {
	with := func(f func(*Config)) Config {
		c := DefaultConfig()
		f(&c)
		return c
	}
	tests := []struct {
		name      string
		cfg       Config
		wantField string // "" means valid
	}{
		{"default", DefaultConfig(), ""},
		{"consistent defaults", Config{271, 20, 1.25}, ""},
		{"smallest", Config{1, 2, 1.1}, ""},
		{"largest", Config{1 << 16, 1000, 1e9}, ""},
		{"zero value", Config{}, "PartitionCount"},
		{"partitions zero", with(func(c *Config) { c.PartitionCount = 0 }), "PartitionCount"},
		{"partitions negative", with(func(c *Config) { c.PartitionCount = -7 }), "PartitionCount"},
		{"partitions too many", with(func(c *Config) { c.PartitionCount = 1<<16 + 1 }), "PartitionCount"},
		{"replication zero", with(func(c *Config) { c.ReplicationFactor = 0 }), "ReplicationFactor"},
		{"replication one", with(func(c *Config) { c.ReplicationFactor = 1 }), "ReplicationFactor"},
		{"replication too many", with(func(c *Config) { c.ReplicationFactor = 1001 }), "ReplicationFactor"},
		{"load zero", with(func(c *Config) { c.Load = 0 }), "Load"},
		{"load one", with(func(c *Config) { c.Load = 1 }), "Load"},
		{"load just under", with(func(c *Config) { c.Load = 1.0999 }), "Load"},
		{"load negative", with(func(c *Config) { c.Load = -2 }), "Load"},
		{"load NaN", with(func(c *Config) { c.Load = math.NaN() }), "Load"},
		{"load +Inf", with(func(c *Config) { c.Load = math.Inf(1) }), "Load"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			_, newErr := New(tt.cfg)
			if tt.wantField == "" {
				if err != nil || newErr != nil {
					t.Fatalf("Validate() = %v, New error = %v, want both nil", err, newErr)
				}
				return
			}
			for _, e := range []error{err, newErr} {
				if e == nil {
					t.Fatalf("Validate() = %v, New error = %v, want both to fail on %s", err, newErr, tt.wantField)
				}
				if !errors.Is(e, ErrInvalidConfig) {
					t.Errorf("error %q does not wrap ErrInvalidConfig", e)
				}
				if !strings.HasPrefix(e.Error(), "ring: Config."+tt.wantField+" ") {
					t.Errorf("error %q does not start with %q", e, "ring: Config."+tt.wantField)
				}
			}
		})
	}
}
