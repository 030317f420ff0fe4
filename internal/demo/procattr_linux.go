package demo

import "syscall"

// childAttr puts a node process in its own process group (a Ctrl-C in the
// terminal reaches the parent only, which then stops the nodes in order)
// and asks the kernel to send it SIGTERM if the parent dies (belt and
// braces with the stdin pipe: see RunNodeMain).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
