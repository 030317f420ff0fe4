// Package peerpb holds the generated code of the peer protocol
// (peer.proto). Regenerate with `go generate ./internal/peerpb`, which needs
// protoc (Debian: protobuf-compiler) and installs the two Go plugins at the
// versions pinned in gen.sh.
package peerpb

//go:generate ./gen.sh
