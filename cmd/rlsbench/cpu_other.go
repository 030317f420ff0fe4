//go:build !linux

package main

import (
	"syscall"
	"time"
)

// pidCPU is unknown outside Linux: rlsbench prints no server CPU.
func pidCPU(int) time.Duration { return 0 }

// childAttr: outside Linux a peerlimit process outlives a killed
// rlsbench (a null server stops when its stdin closes).
func childAttr() *syscall.SysProcAttr { return nil }
