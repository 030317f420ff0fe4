package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Member is one alive node of the cluster, as reported by [Gossip.Members]
// and Config.OnMembers. It is a plain comparable value.
type Member struct {
	// Name is the node's unique name (Config.Name).
	Name string
	// Addr is the node's gossip address, "ip:port".
	Addr string
	// GRPCAddr is the node's gRPC address, "host:port", from its metadata.
	GRPCAddr string
	// Proto is the peer protocol version the node speaks (Config.Proto).
	Proto uint8
}

// Metadata wire format, version 1 (memberlist caps NodeMeta at 512 bytes):
//
//	byte 0      format version (1)
//	byte 1      Proto
//	uvarint     length of GRPCAddr
//	bytes       GRPCAddr
//
// A later version must keep this prefix and append fields after it, so a
// version-1 reader can read a newer node's gRPC address; a version-1 record
// with trailing bytes is malformed.
const metaVersion = 1

// errBadMeta is wrapped by every metadata decoding error.
var errBadMeta = errors.New("gossip: malformed node metadata")

type meta struct {
	grpcAddr string
	proto    uint8
}

func encodeMeta(m meta) []byte {
	b := make([]byte, 0, 2+binary.MaxVarintLen64+len(m.grpcAddr))
	b = append(b, metaVersion, m.proto)
	b = binary.AppendUvarint(b, uint64(len(m.grpcAddr)))
	return append(b, m.grpcAddr...)
}

func decodeMeta(b []byte) (meta, error) {
	if len(b) < 2 {
		return meta{}, fmt.Errorf("%w: %d bytes", errBadMeta, len(b))
	}
	version := b[0]
	if version == 0 {
		return meta{}, fmt.Errorf("%w: version 0", errBadMeta)
	}
	m := meta{proto: b[1]}
	n, k := binary.Uvarint(b[2:])
	if k <= 0 {
		return meta{}, fmt.Errorf("%w: bad address length", errBadMeta)
	}
	rest := b[2+k:]
	if n == 0 || n > maxGRPCAddrLen || n > uint64(len(rest)) {
		return meta{}, fmt.Errorf("%w: address length %d, %d bytes left", errBadMeta, n, len(rest))
	}
	m.grpcAddr = string(rest[:n])
	if version == metaVersion && uint64(len(rest)) != n {
		return meta{}, fmt.Errorf("%w: %d trailing bytes", errBadMeta, uint64(len(rest))-n)
	}
	if err := checkHostPort(m.grpcAddr); err != nil {
		return meta{}, fmt.Errorf("%w: gRPC address: %v", errBadMeta, err)
	}
	return m, nil
}
