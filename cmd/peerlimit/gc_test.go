package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// TestGCDefaults: GOGC=400 unless the environment sets GOGC; a soft
// memory limit of 90% of the cgroup's (v2 memory.max, else v1
// memory.limit_in_bytes) unless it sets GOMEMLIMIT or there is no limit.
func TestGCDefaults(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name  string
		env   map[string]string
		files map[string]string // under the cgroup root
		want  gcSettings
		err   string
	}{
		{name: "no cgroup", want: gcSettings{percent: 400}},
		{name: "GOGC set", env: map[string]string{"GOGC": "100"}, want: gcSettings{}},
		{name: "GOGC off", env: map[string]string{"GOGC": "off"}, want: gcSettings{}},
		{name: "v2 no limit", files: map[string]string{"memory.max": "max\n"}, want: gcSettings{percent: 400}},
		{name: "v2 limit", files: map[string]string{"memory.max": "268435456\n"},
			want: gcSettings{percent: 400, memoryLimit: 256 * mib * 9 / 10, cgroupLimit: 256 * mib}},
		{name: "v2 before v1", files: map[string]string{"memory.max": "268435456\n", "memory/memory.limit_in_bytes": "134217728\n"},
			want: gcSettings{percent: 400, memoryLimit: 256 * mib * 9 / 10, cgroupLimit: 256 * mib}},
		{name: "v1 limit", files: map[string]string{"memory/memory.limit_in_bytes": "134217728\n"},
			want: gcSettings{percent: 400, memoryLimit: 128 * mib * 9 / 10, cgroupLimit: 128 * mib}},
		{name: "v1 no limit", files: map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, want: gcSettings{percent: 400}},
		{name: "GOMEMLIMIT set", env: map[string]string{"GOMEMLIMIT": "1GiB"}, files: map[string]string{"memory.max": "268435456\n"},
			want: gcSettings{percent: 400}},
		{name: "both set", env: map[string]string{"GOGC": "200", "GOMEMLIMIT": "1GiB"}, files: map[string]string{"memory.max": "268435456\n"},
			want: gcSettings{}},
		{name: "GOGC set, limit", env: map[string]string{"GOGC": "100"}, files: map[string]string{"memory.max": "268435456\n"},
			want: gcSettings{memoryLimit: 256 * mib * 9 / 10, cgroupLimit: 256 * mib}},
		{name: "unreadable limit", files: map[string]string{"memory.max": "lots\n"},
			want: gcSettings{percent: 400}, err: `"lots" is not a number of bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tc.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := gcDefaults(func(k string) string { return tc.env[k] }, root)
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one with %q", err, tc.err)
			}
		})
	}
}

// TestGCApply: the settings reach the runtime, and the log reads them
// back.
func TestGCApply(t *testing.T) {
	oldPercent := debug.SetGCPercent(100)
	oldLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	})
	gcSettings{percent: 400, memoryLimit: 230 << 20}.apply()
	if got, want := gcState(), []any{"GOGC", "400", "GOMEMLIMIT", "230MiB"}; !slices.Equal(got, want) {
		t.Errorf("after apply: %v, want %v", got, want)
	}
	gcSettings{}.apply() // nothing to set: what stands stays
	if got, want := gcState(), []any{"GOGC", "400", "GOMEMLIMIT", "230MiB"}; !slices.Equal(got, want) {
		t.Errorf("after applying nothing: %v, want %v", got, want)
	}
}
