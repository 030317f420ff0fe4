// Package peerpb holds the generated code of the peer protocol
// (peer.proto): the messages peers exchange, and the types of node.Store,
// public so that a store of your own can implement it. Regenerate with `go generate ./peerpb`, which needs
// protoc (Debian: protobuf-compiler) and installs the two Go plugins at the
// versions pinned in gen.sh.
package peerpb

//go:generate ./gen.sh
