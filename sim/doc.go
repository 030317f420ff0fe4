// Package sim is peerlimit's partition simulator: a deterministic
// discrete-event simulation, on virtual time, of N instances running the
// real sync code — node.Engine and counters, not a model of them — under
// scripted traffic and faults, measured against the ground truth.
//
// # What is simulated
//
// Events (requests, sync ticks, message deliveries, membership updates,
// faults) sit in one queue ordered by virtual time and then by the order they
// were scheduled, so ties are deterministic. All randomness comes from PCG
// sources derived from the seed: one per traffic stream, one for the network,
// one for membership (clock skew, tick phases, detection jitter). The same
// scenario, policy and seed give the same results, byte for byte.
//
//   - Instances. Each has a node.Engine (policies optimistic, static, lease with the
//     reserve rule, lease-majority with the majority rule),
//     a clock (virtual time plus its skew), a sync ticker with a random phase,
//     and a membership view. Every sync interval it times out the batches of
//     its last round still unanswered (node.Engine.Fail: the timeout is one
//     sync interval), and, if none is left in flight, calls Prepare and sends
//     one batch per owner. Owners answer with Handle; the sender calls Apply
//     on the first answer and ignores any other. A crash drops the engine and
//     all its state; a restart builds a new Engine with a higher Incarnation.
//     A graceful leave does what node.Node.Close does: the instance stops
//     taking requests, syncs once more, sends Engine.Handoff's batches, and
//     leaves the cluster when all are answered or timed out. Local tables
//     are sized to the scenario (counters.Config.MaxEntries), since Prepare
//     and Sweep scan a table's whole capacity; nothing is ever evicted.
//   - Network. Every message takes a base latency plus an exponential or
//     lognormal jitter (which reorders messages), is lost with a probability,
//     and a request is delivered twice with a probability (the owner handles
//     both copies). Messages across a partition are dropped, at sending and
//     at delivery.
//   - Membership. Each instance's view — the running members on its side of
//     any partition — reaches its engine through Engine.SetMembers, the call
//     gossip's callback makes in production, a detection delay after a crash
//     or partition (memberlist's failure detection; default 1 s), a heal
//     delay after a heal (gossip's rejoin loop) or a notify delay after a
//     join, restart or leave (default 200 ms), each plus a per-member
//     jitter. A starting instance knows its side at once (it
//     joined through a seed before serving).
//   - Traffic. Requests go to the running instances by smooth weighted
//     round-robin (exact proportions, deterministic); arrival times are
//     Poisson or evenly spaced, at a rate that may ramp or come in bursts at
//     window starts. A load balancer stops sending to a crashed instance at
//     once.
//   - Central. The "central" policy is a model of seed 000's store, written
//     here because it is an external system: instances admit with the
//     optimistic rule on their own counters.Table and every sync interval send
//     each key's delta to one central counter (INCRBY) and read the total back
//     — one call per key, over the same network, unreachable across a
//     partition, and not idempotent (duplicates and retried deltas count
//     twice, as in the seed).
//
// # Measurement
//
// The simulator counts, per tenant, SLA tier and window of virtual (true)
// time, the requests offered and admitted across all instances, by the
// window they arrived in, and the admitted requests charged to each window,
// by the time they were decided (a request the lease policy kept waiting
// for its owner's answer across a window start is charged to the next
// window, as the instance counts it). Only complete windows count (inside
// the run and not starting before the warm-up, by default the longest
// period). For each window:
//
//	overshoot     = max(0, charged - limit) / limit
//	undershoot    = max(0, min(offered, limit) - charged) / min(offered, limit)
//	false denials = min(offered - admitted, max(0, limit - charged))
//
// false denials being the denied requests the window still had room for
// when it ended (a request refused while its tenant was under its limit);
// a result reports the maxima in percent, the false denials as a share of
// the window's offered requests. For an SLA with several
// tiers, a request denied by another tier is not counted as offered to a
// tier (tiers are charged together: that denial says nothing about this
// tier; the denying tier is the one counters.Decision.Tier names). Sliding
// tiers are measured on the same fixed windows: the sliding rule keeps
// every fixed window within the limit, but may rightly deny early in a
// window after a full one, which reads as undershoot.
//
// sync_messages counts every message put on the simulated wire, delivered
// or not: each request, each duplicate copy, each answer (an owner's
// rejection is an answer with no payload). sync_bytes adds their proto.Size.
// A member's merges of the keys it owns itself are not messages.
//
// # Scenario files
//
// Scenarios are line-oriented text files in testdata/ (embedded; see
// Scenarios). '#' starts a comment. Durations use Go syntax (100ms, 1s).
// Directives:
//
//	desc TEXT                     one-line description (required; shown by -list)
//	instances N                   initial members n0 .. n(N-1) (required)
//	sync DURATION                 sync interval (default 1s)
//	duration DURATION             simulated run length (required)
//	warmup DURATION               windows starting before it are not measured
//	                              (default: the longest tier period)
//	network latency=1ms jitter=exp:1ms loss=1% dup=0.5%
//	                              jitter=exp:MEAN or lognormal:MEDIAN:SIGMA
//	                              (defaults: 1ms, exp:500us, no loss, no dup)
//	profile local|lan             gossip timing the membership delays model (default
//	                              local: detect 700ms jitter=300ms, heal the same,
//	                              notify 200ms; lan, node.DefaultConfig's: detect
//	                              5.5s jitter=1s, heal 100ms jitter=2s (the rejoin
//	                              loop's period), notify 400ms, and from four
//	                              members on a side of one, two or three sees a
//	                              cut after 10, 6.5 or 4.2 s per member it lost;
//	                              see Profiles for what memberlist clusters on
//	                              127.0.0.1 measure)
//	detect DURATION [jitter=D]    failure detection delay, and heal delay (after
//	                              profile, overrides both, and the small sides')
//	notify DURATION               join/leave announcement delay
//	pending DURATION              how long a pending lease decision waits for the
//	                              owner's answers (node.Config.PendingWait; default
//	                              3 x sync; 0 never waits)
//	quorum term=D safe=F          the lease policy's majority rule
//	                              (node.Config.QuorumTerm, default 30s, and
//	                              SafeShare, default 0; for lease-majority)
//	skew NAME OFFSET              a member's clock offset (+250ms, -1s)
//	skew random MAX               others' offsets uniform in [-MAX, +MAX]
//	measure median|real           count windows on the initial members' median
//	                              clock (what the engines enforce) or on
//	                              virtual time (default)
//	sla ID ALG:PERIOD:THRESHOLD...
//	                              an SLA and its tiers (fixed or sliding; the
//	                              period must divide 1h)
//	traffic tenants=T sla=ID rate=R [spread=S] [arrivals=A] [burst=P] [from=D] [to=D]
//	                              tenants: a,b,c or prefix[1-20], one stream each
//	                              rate: 2x (times the SLA's tightest rate) or 150/s;
//	                              ramp=0.5x..3x instead of rate ramps from..to
//	                              spread: even (default) or n0:90%[,n1:5%]; members
//	                              not named share the rest evenly
//	                              arrivals: poisson (default) or even
//	                              burst: each window's (longest period) traffic
//	                              packed into its first P (10%)
//	                              retry=once: a denied request is retried once
//	                              after its Retry-After (whole seconds, >= 1)
//	plot TENANT SLA               the series the plot draws (default: the first traffic line's)
//	at TIME partition A,B | C     cut the members into sides; "store" (the central
//	                              store) may be named, else it stays with the first side
//	at TIME isolate NAME          NAME alone on one side
//	at TIME cut A,B -> C          messages from A and B to C are dropped (one way);
//	                              membership as for a partition
//	at TIME heal
//	at TIME crash NAME [host]     its process stops: calls to it are refused
//	                              (node.Engine.Refused); with host, its host goes
//	                              down too and calls go unanswered
//	at TIME restart NAME          also join, leave
//	expect POLICY BOUND... [target:BOUND...]
//	                              golden bounds the tests check, per policy:
//	                              overshoot<=1% undershoot<=5% overshoot>=10% messages<=N
//	                              falsedeny<=1% (share of a window's requests denied
//	                              although the window ended with room for them)
//
// A member name may be owner:TENANT/SLA: the member that owns the tenant's
// first tier of the SLA on the initial ring. overshoot<=X% holds when every
// measured window admits at most max(X% of its limit, 1 request) above the
// limit (exactly none when X is 0). A target: bound is a design target that
// the result currently misses: the plain bound next to it records the
// measured figure, so that a regression fails and the miss stays visible
// (go test -v and cmd/sim print KNOWN MISS).
package sim
