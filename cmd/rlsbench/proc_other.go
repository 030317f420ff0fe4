//go:build !linux

package main

import (
	"syscall"
)

// childAttr: outside Linux a peerlimit process outlives a killed
// rlsbench (a null server stops when its stdin closes).
func childAttr() *syscall.SysProcAttr { return nil }
