package node

import "github.com/peerlimit/peerlimit/ring"

func ringDefault() ring.Config { return ring.DefaultConfig() }
