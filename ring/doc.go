// Package ring maps a limit key to the name of the cluster member that owns
// it.
//
// A [Ring] is a consistent-hash ring with bounded loads, built with
// github.com/buraksezer/consistent and hashed with github.com/cespare/xxhash/v2.
// Keys are not placed on the ring one by one: the key space is cut into a
// fixed number of partitions ([Config.PartitionCount]), a key's partition is
//
//	partition = keyHash % PartitionCount
//
// and each partition has exactly one owner. This is the computation of
// consistent's FindPartitionID; with the xxhash hasher used here,
// Owner(xxhash.Sum64(key)) returns the same member as consistent's
// LocateKey(key), which the tests check on random keys.
//
// Every rebuild ([Ring.Set]) runs consistent's partition assignment once and
// copies the result into an immutable snapshot holding one owner name per
// partition; the snapshot is swapped in with an atomic pointer. A lookup
// ([Ring.Owner], [Ring.Locate]) is therefore a pointer load, a modulo and a
// slice index: it takes no lock, never waits for a rebuild and does not
// allocate.
//
// The assignment is a pure function of the member set and the Config: the
// members are sorted before they are handed to consistent, so every node that
// sees the same membership computes the same owner for every key, whatever
// order its membership source reports them in.
//
// Bounded loads: no member owns more than ceil(Load × PartitionCount / members)
// partitions. The price is that a membership change can move a few partitions
// between members that stayed: on a join, most moved keys go to the new
// member but not all; on a leave, the departed member's keys move and a few
// others may too. README.md in this directory gives measured figures.
//
// The package is modelled on golang/groupcache's consistenthash, without its
// package-level state: any number of rings can live in one process.
package ring
