// Package prefetch asks the CPU for memory ahead of its use. The sync walks
// every series of a large table and every window an owner holds, few of
// them in the CPU's caches; asking for a chunk's objects at once, before
// working on any, has their loads from memory overlap instead of each
// waiting for the last.
package prefetch
