//go:build !unix

package cputime

import "time"

// Self is not measured on this platform: it returns 0.
func Self() time.Duration { return 0 }
