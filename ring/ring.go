package ring

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/buraksezer/consistent"
	"github.com/cespare/xxhash/v2"
)

// Ring maps key hashes to the names of the members that own them.
//
// The zero value is not usable; create a Ring with [New]. A Ring is safe for
// concurrent use: [Ring.Owner], [Ring.Locate], [Ring.Members] and
// [Ring.Version] take no lock and never wait for [Ring.Set], which serialises
// with other calls to Set only.
type Ring struct {
	cfg  Config
	mu   sync.Mutex // serialises Set; lookups never take it
	snap atomic.Pointer[snapshot]
}

// snapshot is one immutable build of the ring. It is never modified after
// it is stored, so readers may use it without synchronisation.
type snapshot struct {
	owners  []string // owners[p] owns partition p; nil when there are no members
	members []string // sorted, unique, non-empty names
	version uint64
}

// New returns an empty Ring shaped by cfg: until the first [Ring.Set] with at
// least one member, every lookup reports no owner. It returns an error
// wrapping [ErrInvalidConfig] if cfg is not valid. New starts no goroutine.
func New(cfg Config) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Ring{cfg: cfg}
	r.snap.Store(&snapshot{})
	return r, nil
}

// Set rebuilds the ring for the given member names and swaps the new
// ownership in atomically. Lookups running meanwhile see either the old or
// the new ring, never a mix, and never wait.
//
// The order of members does not matter, duplicates count once and empty
// names are ignored. If the resulting set equals the current one, Set does
// nothing and returns false; otherwise it returns true and [Ring.Version]
// goes up by one. Set(nil) empties the ring.
//
// Set costs a full rebuild, which grows with members² × ReplicationFactor
// plus PartitionCount (see BenchmarkSet); call it on membership changes, not
// per request. Set does not retain members.
func (r *Ring) Set(members []string) bool {
	set := normalize(members)
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.snap.Load()
	if slices.Equal(cur.members, set) {
		return false
	}
	r.snap.Store(&snapshot{
		owners:  assign(set, r.cfg),
		members: set,
		version: cur.version + 1,
	})
	return true
}

// Owner returns the member that owns keyHash, the 64-bit xxhash of the key
// (see [Ring.Locate]), and true; or "" and false if the ring has no members.
//
// The owner is that of partition keyHash % PartitionCount, which is what
// consistent's FindPartitionID computes from the hash. Owner takes no lock
// and does not allocate.
func (r *Ring) Owner(keyHash uint64) (string, bool) { return r.snap.Load().owner(keyHash) }

// owner is Owner on one build of the ring.
func (s *snapshot) owner(keyHash uint64) (string, bool) {
	if len(s.owners) == 0 {
		return "", false
	}
	return s.owners[keyHash%uint64(len(s.owners))], true
}

// OwnerFunc returns the current ownership as a function: it answers as
// Owner does for the ring as it is now, and keeps doing so after later
// calls to Set (it holds this build of the ring, which Set never changes).
func (r *Ring) OwnerFunc() func(keyHash uint64) (string, bool) { return r.snap.Load().owner }

// Locate returns the owner of key: it is Owner(xxhash.Sum64(key)), and gives
// the same member as consistent's LocateKey(key) for the same members and
// Config.
func (r *Ring) Locate(key []byte) (string, bool) {
	return r.Owner(xxhash.Sum64(key))
}

// Members returns the current member names, sorted. The slice is a copy the
// caller may modify.
func (r *Ring) Members() []string {
	return slices.Clone(r.snap.Load().members)
}

// Version returns the number of rebuilds so far: 0 for a new Ring, then one
// more for each call to [Ring.Set] that returned true. Two lookups made under
// the same Version used the same ownership.
func (r *Ring) Version() uint64 {
	return r.snap.Load().version
}

// normalize returns a sorted copy of members without duplicates or empty
// names, or nil if none is left.
func normalize(members []string) []string {
	set := make([]string, 0, len(members))
	for _, m := range members {
		if m != "" {
			set = append(set, m)
		}
	}
	if len(set) == 0 {
		return nil
	}
	slices.Sort(set)
	return slices.Compact(set)
}

// member adapts a name to consistent.Member.
type member string

func (m member) String() string { return string(m) }

// xxhasher adapts xxhash to consistent.Hasher.
type xxhasher struct{}

func (xxhasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// assign returns the owner of every partition for the sorted, unique member
// names, or nil if there are none.
//
// The members reach consistent in sorted order. consistent's result depends
// on insertion order only when two ring points collide (the later member
// wins the point), so sorting makes the result a pure function of the set.
//
// consistent.New panics if it cannot place a partition. With a valid Config
// that cannot happen: members × ceil(Load × partitions / members) ≥ Load ×
// partitions > partitions, and each partition's walk visits every member
// that has a ring point. A member could lose all its points only to 64-bit
// hash collisions between crafted names; rather than crash the node on such
// input, assign then falls back to owners[p] = members[p % len(members)],
// which is balanced and, like the normal path, the same on every node.
func assign(members []string, cfg Config) (owners []string) {
	if len(members) == 0 {
		return nil
	}
	defer func() {
		if recover() != nil {
			owners = fallbackAssign(members, cfg.PartitionCount)
		}
	}()
	cms := make([]consistent.Member, len(members))
	for i, m := range members {
		cms[i] = member(m)
	}
	c := consistent.New(cms, consistent.Config{
		Hasher:            xxhasher{},
		PartitionCount:    cfg.PartitionCount,
		ReplicationFactor: cfg.ReplicationFactor,
		Load:              cfg.Load,
	})
	owners = make([]string, cfg.PartitionCount)
	for p := range owners {
		owners[p] = c.GetPartitionOwner(p).String()
	}
	return owners
}

// fallbackAssign deals partitions to members round-robin.
func fallbackAssign(members []string, partitions int) []string {
	owners := make([]string, partitions)
	for p := range owners {
		owners[p] = members[p%len(members)]
	}
	return owners
}
