package node

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
)

// Peer authentication. When the gossip has secret keys, every Sync request
// and its answer carry an HMAC-SHA256 under a key derived from the gossip
// keyring, in the gRPC metadata (authHeader): a process that does not hold
// a key of the keyring can neither report counts nor answer as an owner.
//
//   - A request's tag covers its send time and the request as encoded
//     (origin, incarnation, every report); the receiver accepts it within
//     authSkew of its own clock, once (a replayed request is refused).
//   - An answer's tag covers the request's tag and the answer, so that an
//     answer is good for the one request it answers.
//   - The sender signs with the keyring's primary key; the receiver
//     accepts any installed key. Rotating (InstallKey everywhere, then
//     UseKey, then RemoveKey of the old one) refuses no honest peer.
//
// The keys are derived (HMAC of the gossip key over a label), so the sync
// plane never uses the gossip's AES key as such.

// authHeader is the gRPC metadata key of the tags.
const authHeader = "peerlimit-auth"

// authSkew is how far a request's send time may be from the receiver's
// clock. Clocks of members must agree within this for sync to work.
const authSkew = 30 * time.Second

// maxAuthSeen bounds the replay cache: tags of requests accepted within
// authSkew. Only authenticated requests enter it, so a flood without a key
// cannot fill it; past the bound the oldest are forgotten.
const maxAuthSeen = 1 << 18

var (
	errAuthMissing = errors.New("no authentication tag (the gossip has secret keys: peers must sign their sync calls)")
	errAuthBad     = errors.New("authentication tag does not verify under any installed key")
	errAuthStale   = errors.New("authentication tag outside the accepted time (clocks apart, or a replay)")
	errAuthReplay  = errors.New("request already seen (a replay)")
)

// peerAuth signs and verifies sync calls with the keys keys returns (the
// gossip keyring, primary first). The zero keys (none) turns it off.
type peerAuth struct {
	keys func() [][]byte

	mu    sync.Mutex
	seen  map[[sha256.Size]byte]int64 // accepted request tags, to when they expire (Unix ns)
	order [][sha256.Size]byte         // the same, oldest first
}

func newPeerAuth(keys func() [][]byte) *peerAuth {
	return &peerAuth{keys: keys, seen: map[[sha256.Size]byte]int64{}}
}

// on reports whether calls are authenticated: the keyring has keys.
func (a *peerAuth) on() bool { return a != nil && len(a.keys()) > 0 }

// syncKey derives the sync plane's key from a gossip key.
func syncKey(gossipKey []byte) []byte {
	m := hmac.New(sha256.New, gossipKey)
	m.Write([]byte("peerlimit sync authentication v1"))
	return m.Sum(nil)
}

var marshal = proto.MarshalOptions{Deterministic: true}

func tag(key []byte, label string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		m.Write(n[:])
		m.Write(p)
	}
	return m.Sum(nil)
}

// oneValue returns the value of a metadata key sent once, or "" (a key
// missing or repeated does not verify).
func oneValue(vs []string) string {
	if len(vs) != 1 {
		return ""
	}
	return vs[0]
}

// signRequest returns the metadata value for req sent at now, and the tag
// (to check the answer with).
func (a *peerAuth) signRequest(now time.Time, req proto.Message) (string, []byte, error) {
	keys := a.keys()
	if len(keys) == 0 {
		return "", nil, nil
	}
	body, err := marshal.Marshal(req)
	if err != nil {
		return "", nil, fmt.Errorf("node: encode sync request: %w", err)
	}
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(now.UnixNano()))
	t := tag(syncKey(keys[0]), "request", ts[:], body)
	return base64.RawURLEncoding.EncodeToString(append(ts[:], t...)), t, nil
}

// verifyRequest checks the metadata value v of req received at now and
// returns the request's tag, for the answer.
func (a *peerAuth) verifyRequest(now time.Time, req proto.Message, v string) ([]byte, error) {
	if v == "" {
		return nil, errAuthMissing
	}
	// Strict: the last character of a tag carries bits past its bytes,
	// which a lenient decoder ignores, so that other tags than the one
	// made verified too (FuzzAuthEnvelope found one).
	raw, err := base64.RawURLEncoding.Strict().DecodeString(v)
	if err != nil || len(raw) != 8+sha256.Size {
		return nil, errAuthBad
	}
	ts, got := raw[:8], raw[8:]
	body, err := marshal.Marshal(req)
	if err != nil {
		return nil, errAuthBad
	}
	ok := false
	for _, k := range a.keys() {
		if hmac.Equal(got, tag(syncKey(k), "request", ts, body)) {
			ok = true
			break
		}
	}
	if !ok {
		return nil, errAuthBad
	}
	sent := int64(binary.BigEndian.Uint64(ts))
	nowNs := now.UnixNano()
	if d := nowNs - sent; d > int64(authSkew) || d < -int64(authSkew) {
		return nil, errAuthStale
	}
	var id [sha256.Size]byte
	copy(id[:], got)
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, dup := a.seen[id]; dup {
		return nil, errAuthReplay
	}
	for len(a.order) > 0 && (a.seen[a.order[0]] < nowNs || len(a.order) >= maxAuthSeen) {
		delete(a.seen, a.order[0])
		a.order = a.order[1:]
	}
	a.seen[id] = sent + 2*int64(authSkew)
	a.order = append(a.order, id)
	return got, nil
}

// signResponse returns the metadata value for resp, the answer to the
// request whose tag is reqTag.
func (a *peerAuth) signResponse(reqTag []byte, resp proto.Message) (string, error) {
	keys := a.keys()
	if len(keys) == 0 {
		return "", nil
	}
	body, err := marshal.Marshal(resp)
	if err != nil {
		return "", fmt.Errorf("node: encode sync answer: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(tag(syncKey(keys[0]), "answer", reqTag, body)), nil
}

// verifyResponse checks the metadata value v of resp, the answer to the
// request whose tag is reqTag.
func (a *peerAuth) verifyResponse(reqTag []byte, resp proto.Message, v string) error {
	got, err := base64.RawURLEncoding.Strict().DecodeString(v)
	if v == "" || err != nil {
		return fmt.Errorf("node: sync answer: %w", errAuthMissing)
	}
	body, err := marshal.Marshal(resp)
	if err != nil {
		return fmt.Errorf("node: sync answer: %w", errAuthBad)
	}
	for _, k := range a.keys() {
		if hmac.Equal(got, tag(syncKey(k), "answer", reqTag, body)) {
			return nil
		}
	}
	return fmt.Errorf("node: sync answer: %w", errAuthBad)
}
