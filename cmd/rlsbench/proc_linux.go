package main

import (
	"syscall"
)

// childAttr makes a server process die with rlsbench, however it ends.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
