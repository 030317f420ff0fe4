// Package redisstore keeps peerlimit's global counts in Redis, for
// deployments that prefer a shared store to summing counts at peer owners.
//
// A node in Redis mode calls [Store.Sync] once per sync interval with every
// window that changed, instead of calling peers, and caches the totals it
// gets back; decisions stay local, as in peer mode. This is the Salesforce
// filter's design (seed 000: INCRBY then EXPIRE once per sync interval),
// made safe to retry:
//
//   - The seed sends bare deltas (INCRBY callsSinceLastSync). A retried or
//     duplicated INCRBY counts twice, and a lost reply leaves the instance
//     unsure whether its delta landed. Here each instance sends its
//     cumulative count per window, and Redis keeps the largest value per
//     origin run ("origin/incarnation") in a hash, with a total field moved by
//     the difference: a G-counter. Retries, duplicates and stale reports
//     change nothing; reading a total is O(1).
//   - The seed makes one round trip per key per sync. Sync sends the whole
//     batch in one round trip (one Lua script call per 1,000 keys, pipelined),
//     whatever the number of keys.
//   - The seed's EXPIRE is relative to the first write (window + 2 s after
//     it). Here a window's key expires at an absolute time every instance
//     agrees on: window end + Config.Grace (PEXPIREAT on the first write).
//
// Keys are
//
//	KeyPrefix + "w|" + tenant + "|" + endpoint + "|" + method + "|" + period_ms + "|" + window_start_ms
//
// with "\" and "|" escaped inside the fields, so distinct series never
// collide. Keys are at most [MaxKeyLen] bytes.
//
// # Failure
//
// Every call is bounded by Config.Timeout (100 ms by default): the sync
// loop never hangs on Redis. A Redis that is down, unreachable or too slow
// gives an error wrapping [ErrUnavailable], so the node can fall back (fail
// open to its static share, or fail closed). The next successful Sync
// catches up, because reports are cumulative.
//
// If Redis restarts without persistence, the current windows' counts are
// lost with it. They come back from the origins' next cumulative reports:
// a window's total restarts from what each origin reports next, and is whole
// again once every origin has reported (one sync interval). That recovery is
// exactly why reports are cumulative rather than deltas. The script cache is
// lost too; Sync answers NOSCRIPT by sending the script itself (EVAL).
//
// # Comparison design
//
// [PerRequest] is the classic central counter (seed 001): one INCRBY +
// PEXPIREAT round trip per decision. It is exact but puts Redis latency on
// every request; it exists so benchmarks can compare the two designs.
//
// Both need one standalone Redis (or a proxy): no Redis Cluster, because a
// batch script touches keys in many hash slots.
package redisstore
