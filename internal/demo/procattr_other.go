//go:build !linux

package demo

import "syscall"

// childAttr: outside Linux there is no parent-death signal; a node process
// still exits when its stdin (a pipe held by the parent) reaches EOF.
func childAttr() *syscall.SysProcAttr { return nil }
