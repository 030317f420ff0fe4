package demo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Fault actions.
const (
	ActionKill      = "kill"      // SIGKILL a node
	ActionRestart   = "restart"   // start a killed node again, same name and ports
	ActionPartition = "partition" // split the network: arg "n1,n2|n3"
	ActionHeal      = "heal"      // remove the partition
)

// ErrBadFault is returned (wrapped) for a fault script that does not parse.
var ErrBadFault = errors.New("demo: bad fault")

// Fault is one scripted fault: Action on Arg at At after the load starts.
type Fault struct {
	At     time.Duration
	Action string
	Arg    string
}

// FaultResult is a fault as it was carried out.
type FaultResult struct {
	Time   time.Time `json:"time"`
	At     float64   `json:"at_s"` // seconds after the load started (or the cluster was ready)
	Action string    `json:"action"`
	Arg    string    `json:"arg,omitempty"`
	Error  string    `json:"error,omitempty"`
}

// ParseFaults parses a fault script: faults separated by ";", each
// "DURATION ACTION [ARG]", for example
//
//	5s kill n3; 9s restart n3; 12s partition n1,n2|n3; 16s heal
//
// names are the cluster's node names, to check the arguments.
func ParseFaults(script string, names []string) ([]Fault, error) {
	var out []Fault
	for _, part := range strings.Split(script, ";") {
		f := strings.Fields(part)
		if len(f) == 0 {
			continue
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w %q: %s", ErrBadFault, strings.TrimSpace(part), fmt.Sprintf(format, args...))
		}
		if len(f) < 2 {
			return nil, bad("want DURATION ACTION [ARG]")
		}
		at, err := time.ParseDuration(f[0])
		if err != nil || at < 0 {
			return nil, bad("bad duration %q", f[0])
		}
		ft := Fault{At: at, Action: f[1], Arg: strings.Join(f[2:], "")}
		switch ft.Action {
		case ActionKill, ActionRestart:
			if !slices.Contains(names, ft.Arg) {
				return nil, fmt.Errorf("%w %q: %w %q", ErrBadFault, strings.TrimSpace(part), ErrUnknownNode, ft.Arg)
			}
		case ActionPartition:
			p, err := ParsePartition(ft.Arg, names)
			if err != nil {
				return nil, bad("%v", err)
			}
			if p == nil {
				return nil, bad("the partition cuts nothing")
			}
		case ActionHeal:
			if ft.Arg != "" {
				return nil, bad("heal takes no argument")
			}
		default:
			return nil, bad("unknown action %q (want kill, restart, partition or heal)", ft.Action)
		}
		out = append(out, ft)
	}
	slices.SortStableFunc(out, func(a, b Fault) int { return int(a.At - b.At) })
	return out, nil
}

// Do carries out one action on the cluster and records it in the monitor
// (at = seconds since the reference time, for the record).
func Do(ctx context.Context, sup *Supervisor, mon *Monitor, ref time.Time, action, arg string) FaultResult {
	r := FaultResult{Time: time.Now(), Action: action, Arg: arg}
	if !ref.IsZero() {
		r.At = float64(r.Time.Sub(ref).Milliseconds()) / 1e3
	}
	var err error
	switch action {
	case ActionKill:
		err = sup.Kill(arg)
	case ActionRestart:
		err = sup.Restart(ctx, arg)
	case ActionPartition:
		err = sup.Partition(ctx, arg)
	case ActionHeal:
		err = sup.Heal(ctx)
	default:
		err = fmt.Errorf("%w: unknown action %q", ErrBadFault, action)
	}
	if err != nil {
		r.Error = err.Error()
	}
	if mon != nil {
		mon.AddFault(r)
	}
	return r
}

// RunFaults carries out the script, each fault at ref + At, until ctx ends.
func RunFaults(ctx context.Context, sup *Supervisor, mon *Monitor, ref time.Time, faults []Fault) {
	for _, f := range faults {
		t := time.NewTimer(time.Until(ref.Add(f.At)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		Do(ctx, sup, mon, ref, f.Action, f.Arg)
	}
}
