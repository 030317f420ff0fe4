package gossip

import (
	"errors"
	"strings"
	"testing"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, m := range []meta{
		{grpcAddr: "127.0.0.1:7070", proto: 1},
		{grpcAddr: "[::1]:1", proto: 0},
		{grpcAddr: strings.Repeat("h", maxGRPCAddrLen-6) + ":65535", proto: 255},
	} {
		b := encodeMeta(m)
		if len(b) > 512 {
			t.Fatalf("%d bytes exceed memberlist's limit", len(b))
		}
		got, err := decodeMeta(b)
		if err != nil || got != m {
			t.Fatalf("decode(encode(%+v)) = %+v, %v", m, got, err)
		}
	}
}

func TestDecodeMetaMalformed(t *testing.T) {
	good := encodeMeta(meta{grpcAddr: "127.0.0.1:7070", proto: 1})
	tests := map[string][]byte{
		"nil":              nil,
		"one byte":         {1},
		"version 0":        append([]byte{0}, good[1:]...),
		"no length":        {1, 1},
		"length too big":   {1, 1, 200, 'a'},
		"empty address":    {1, 1, 0},
		"not host:port":    append([]byte{1, 1, 5}, "hello"...),
		"trailing bytes":   append(append([]byte{}, good...), 'x'),
		"overlong varint":  {1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"random garbage":   {0xff, 0x00, 0x13, 0x37},
		"address over max": append([]byte{1, 1, 0x80, 0x02}, strings.Repeat("a", 256)...),
	}
	for name, b := range tests {
		if m, err := decodeMeta(b); !errors.Is(err, errBadMeta) {
			t.Errorf("%s: decodeMeta = %+v, %v; want errBadMeta", name, m, err)
		}
	}
}

func TestDecodeMetaNewerVersion(t *testing.T) {
	// A version-2 node appends fields after the version-1 prefix; a
	// version-1 reader still gets the address.
	b := encodeMeta(meta{grpcAddr: "127.0.0.1:7070", proto: 4})
	b[0] = 2
	b = append(b, 0xAA, 0xBB)
	got, err := decodeMeta(b)
	if err != nil || got.grpcAddr != "127.0.0.1:7070" || got.proto != 4 {
		t.Fatalf("decodeMeta(v2) = %+v, %v", got, err)
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add(encodeMeta(meta{grpcAddr: "127.0.0.1:7070", proto: 1}))
	f.Add([]byte{1, 1, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			return
		}
		if checkHostPort(m.grpcAddr) != nil {
			t.Fatalf("accepted an invalid address %q", m.grpcAddr)
		}
	})
}
