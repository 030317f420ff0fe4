package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/peerlimit/peerlimit/counters"
	"github.com/peerlimit/peerlimit/internal/prefetch"
	"github.com/peerlimit/peerlimit/peerpb"
	"google.golang.org/protobuf/encoding/protowire"
)

// The packed sync encoding (SyncRequest.session .. packed_count and
// SyncResponse.packed, resync): what a member sends an owner every
// interval is a few varints per window, and a series' identity (tenant,
// endpoint, method, period, threshold, algorithm) crosses the wire once
// per session, as an entry of a dictionary the sender keeps per receiver.
//
// Layouts. u() is an unsigned varint, z() a zigzag-encoded signed one.
//
// dict, the definitions of series dict_base, dict_base+1, ...:
//
//	u(len) tenant
//	u(scope): 0 = a new scope follows, numbered next (1, 2, ... within
//	   this dict field); else that scope again
//	a new scope: u(len) endpoint, u(len) method, u(period_ms),
//	   u(threshold<<1 | algorithm)
//
// packed, one report after another:
//
//	z(index - previous index - 1)       (previous is -1 for the first)
//	z(at_ns/period - window_start/period) (0: the window holding at_ns)
//	u(own) u(demand)
//	u(flags): bit 0 has_grant, bit 1 carry, bit 2 cap_from is known_from,
//	   bits 3.. known_from (0 = none, i = names[i-1])
//	u(cap_from)                          (only if bit 2 is clear)
//	z(cap - own) z(own - known_acked) z(known_global - known_acked)
//
// SyncResponse.packed, one total per report:
//
//	u(global) u(flags): bit 0 has_grant, bit 1 carry, bit 2 prompt
//	z(grant - own)                       (only with has_grant)
//	z(spare)
//
// SyncResponse.heads and SyncRequest.known_heads, each empty or one u(head)
// per packed total or report, in order (checkHeads): the owner's head
// (counters.Answer.Head) and its return with known_global. They are fields
// of their own, which members of earlier versions ignore, rather than
// part of the packed layouts, which they would misread.
//
// The sender repeats every definition its receiver has not acknowledged
// (dict_base is the first unacknowledged index), so that a lost request or
// answer costs nothing; a receiver that holds fewer than dict_base entries
// of the session (it restarted, or a request never reached it) answers
// resync, counting nothing, and the sender starts a new session: the
// counts are cumulative and go again at the next interval, so none is lost
// or doubled.

// Bounds of the packed encoding.
const (
	// maxDictBytes bounds the definitions in one request: series past it
	// wait for the next interval (as past MaxBatch).
	maxDictBytes = 4 << 20
	// maxNames bounds SyncRequest.names.
	maxNames = 1024
)

// sendDict is this member's dictionary of series for one receiver. The
// engine's wireMu guards it.
type sendDict struct {
	session   uint32
	ents      []*counters.Entry // by index: the series defined
	thr       []int64           // threshold<<1 | algorithm, as defined
	confirmed int               // definitions the receiver acknowledged
	base      int               // the index of the first definition in pending
	pending   []byte            // definitions base..len(ents)-1, encoded
	scopes    map[scopeDef]uint64
	last      scopeDef // the last scope defined in pending, and its number
	lastNum   uint64
}

type scopeDef struct {
	endpoint, method string
	periodMs, thr    int64
}

// recvDict is an origin's dictionary as this member received it (session
// 0: none). Its mutex is held while a batch of the origin is decoded.
type recvDict struct {
	// name is the origin's: every report of its batches is made in this
	// one string, so that the owner compares its origins' names by their
	// pointers.
	name        string
	mu          sync.Mutex
	incarnation uint64
	session     uint32
	keys        []wireKey
}

type wireKey struct {
	tenant, endpoint, method string
	period                   time.Duration
	threshold                int64
	alg                      counters.Algorithm
	hash                     uint64
	series                   *counters.OwnerSeries // the owner's handle (Report.Series)
}

// localDict holds the owner's handles (Report.Series) of the series this
// member owns, by the entries' wire index, as a sendDict holds their
// definitions for a receiver: an entry's index is either, and each checks
// it is its own. wireMu guards it.
type localDict struct {
	ents   []*counters.Entry
	series []*counters.OwnerSeries
}

// index returns en's index, adding it if need be. en must be locked.
func (d *localDict) index(en *counters.Entry) int32 {
	if i := int(en.WireIndex()); i > 0 && i <= len(d.ents) && d.ents[i-1] == en {
		return int32(i - 1)
	}
	d.ents = append(d.ents, en)
	d.series = append(d.series, nil)
	en.SetWireIndex(uint32(len(d.ents)))
	return int32(len(d.ents) - 1)
}

// trim starts the dictionary afresh once it holds more than max series
// (most of them gone from the table).
func (d *localDict) trim(max int) {
	if len(d.ents) > max || len(d.ents) >= math.MaxInt32-1 {
		*d = localDict{}
	}
}

// encoder builds one batch's packed reports.
type encoder struct {
	d       *sendDict
	session uint32
	prev    int64
	at      int64
	buf     []byte
	n       int
	// heads holds the known heads of the reports so far (known_heads),
	// from the first one above 0 on: nil while all are 0.
	heads   []byte
	names   []string
	incs    []uint64
	defsEnd int // len(d.ents) once built: what an answer acknowledges
	// peers resolves the slots' owner runs (counters.PeerID), and refs
	// holds their references in names, by id, once resolved (0: not yet;
	// else the reference plus one).
	peers *counters.Table
	refs  []uint32
	// spare gives heads its buffer, as Engine.Release takes it back.
	spare *spares[byte]
}

// dictFor returns the dictionary for owner, starting a new session when
// the old one holds too many series that are gone (more than twice the
// table) or too many unacknowledged definitions. wireMu must be held.
func (e *Engine) dictFor(owner string) *sendDict {
	d := e.dicts[owner]
	if d == nil || len(d.ents) > 2*e.table.Len()+1024 || len(d.ents)-d.confirmed > 2*e.cfg.MaxBatch {
		d = e.newDict(owner)
	}
	return d
}

func (e *Engine) newDict(owner string) *sendDict {
	e.sessions++
	if e.sessions == 0 {
		e.sessions++
	}
	d := &sendDict{session: e.sessions}
	e.dicts[owner] = d
	return d
}

func (e *Engine) newEncoder(owner string, nowNs int64, capacity int) *encoder {
	return &encoder{d: e.dictFor(owner), prev: -1, at: nowNs, buf: e.spare.bytes.take(16*capacity + 16), peers: e.table, spare: &e.spare.bytes}
}

// index returns the dictionary index of en, defining it if need be, or
// false if the definitions of this request are full. en must be locked.
func (c *encoder) index(en *counters.Entry) (int64, bool) {
	d := c.d
	thr := en.Threshold()<<1 | int64(en.Algorithm()&1)
	if i := int(en.WireIndex()); i > 0 && i <= len(d.ents) && d.ents[i-1] == en && d.thr[i-1] == thr {
		return int64(i - 1), true
	}
	if len(d.pending) >= maxDictBytes || len(d.ents) >= math.MaxUint32-1 {
		return 0, false
	}
	tenant, endpoint, method, period := en.Identity()
	sc := scopeDef{endpoint: endpoint, method: method, periodMs: period.Milliseconds(), thr: thr}
	d.pending = binary.AppendUvarint(d.pending, uint64(len(tenant)))
	d.pending = append(d.pending, tenant...)
	num := d.lastNum
	if num == 0 || sc != d.last {
		if d.scopes == nil {
			d.scopes = map[scopeDef]uint64{}
		}
		num = d.scopes[sc]
	}
	if num != 0 {
		d.pending = binary.AppendUvarint(d.pending, num)
	} else {
		num = uint64(len(d.scopes) + 1)
		d.scopes[sc] = num
		d.pending = append(d.pending, 0)
		d.pending = binary.AppendUvarint(d.pending, uint64(len(endpoint)))
		d.pending = append(d.pending, endpoint...)
		d.pending = binary.AppendUvarint(d.pending, uint64(len(method)))
		d.pending = append(d.pending, method...)
		d.pending = binary.AppendUvarint(d.pending, uint64(sc.periodMs))
		d.pending = binary.AppendUvarint(d.pending, uint64(thr))
	}
	d.last, d.lastNum = sc, num
	d.ents = append(d.ents, en)
	d.thr = append(d.thr, thr)
	en.SetWireIndex(uint32(len(d.ents)))
	return int64(len(d.ents) - 1), true
}

// name returns the reference of an owner name and run (0 for none).
func (c *encoder) name(n string, inc uint64) uint64 {
	if n == "" {
		return 0
	}
	for i := range c.names {
		if c.names[i] == n && c.incs[i] == inc {
			return uint64(i + 1)
		}
	}
	c.names = append(c.names, n)
	c.incs = append(c.incs, inc)
	return uint64(len(c.names))
}

// peer returns the reference of an owner run by its id in the table (0
// for none).
func (c *encoder) peer(id counters.PeerID) uint64 {
	if int(id) < len(c.refs) && c.refs[id] != 0 {
		return uint64(c.refs[id] - 1)
	}
	ref := c.name(c.peers.Peer(id))
	if id < maxPeerRefs {
		if int(id) >= len(c.refs) {
			c.refs = append(c.refs, make([]uint32, int(id)+1-len(c.refs))...)
		}
		c.refs[id] = uint32(ref + 1)
	}
	return ref
}

// maxPeerRefs bounds the owner runs an encoder keeps the references of by
// id: a table makes one per member run that answered it.
const maxPeerRefs = 4096

// add appends the report of the window of s (a series of period p), at
// index i, with the cap the member may reach and whether it is a grant
// (see counters.Report). Its entry must be locked.
func (c *encoder) add(i, p int64, s *counters.Slot, capv int64, has bool) {
	b := c.buf
	b = binary.AppendUvarint(b, protowire.EncodeZigZag(i-c.prev-1))
	c.prev = i
	b = binary.AppendUvarint(b, protowire.EncodeZigZag(c.at/p-s.Start/p))
	b = binary.AppendUvarint(b, uint64(s.Own))
	b = binary.AppendUvarint(b, uint64(s.Demand))
	kf := c.peer(s.From)
	cf := c.peer(s.GrantFrom)
	flags := kf << 3
	if has {
		flags |= 1
		if s.Carry {
			flags |= 2
		}
	}
	if cf == kf {
		flags |= 4
	}
	b = binary.AppendUvarint(b, flags)
	if cf != kf {
		b = binary.AppendUvarint(b, cf)
	}
	b = binary.AppendUvarint(b, protowire.EncodeZigZag(capv-s.Own))
	b = binary.AppendUvarint(b, protowire.EncodeZigZag(s.Own-s.Acked))
	b = binary.AppendUvarint(b, protowire.EncodeZigZag(s.Global-s.Acked))
	c.buf = b
	if s.Head > 0 && c.heads == nil {
		c.heads = c.spare.take(2*c.n + 16)[:c.n]
		clear(c.heads) // a zero head is one byte of 0
	}
	if c.heads != nil {
		c.heads = binary.AppendUvarint(c.heads, uint64(max(0, s.Head)))
	}
	c.n++
}

// finish fills the request's packed fields.
func (c *encoder) finish(req *peerpb.SyncRequest) {
	d := c.d
	c.session, c.defsEnd = d.session, len(d.ents)
	if c.n == 0 && len(d.pending) == 0 {
		return // nothing to say: an empty batch
	}
	req.Session = d.session
	req.DictBase = uint32(d.base)
	req.Dict = d.pending
	req.AtNs = c.at
	req.Names, req.NameIncarnations = c.names, c.incs
	req.Packed, req.PackedCount = c.buf, uint32(c.n)
	req.KnownHeads = c.heads
}

// checkHeads checks the heads of n reports or totals
// (SyncRequest.known_heads, SyncResponse.heads): none if b is empty, else
// exactly n unsigned varints of at most MaxCount. It returns a reader of
// them, which holds bytes until the last one is read if there are any:
// the caller reads one per report with next, which reads 0 if there are
// none.
func checkHeads(b []byte, n int) (reader, error) {
	if len(b) > binary.MaxVarintLen64*n {
		return reader{}, fmt.Errorf("%d bytes of heads for %d", len(b), n)
	}
	r := reader{b: b}
	for i := 0; i < n && len(b) > 0; i++ {
		if v := r.u(); r.bad || v > uint64(MaxCount) {
			return reader{}, fmt.Errorf("head %d malformed or out of range 0..%d", i, MaxCount)
		}
	}
	if len(r.b) > 0 {
		return reader{}, fmt.Errorf("%d bytes after %d heads", len(r.b), n)
	}
	return reader{b: b}, nil
}

// acknowledged records that the receiver holds the batch's definitions.
// wireMu must be held.
func (e *Engine) acknowledged(owner string, c *encoder) {
	d := e.dicts[owner]
	if d == nil || d != c.d || c.defsEnd <= d.confirmed {
		return
	}
	d.confirmed = c.defsEnd
	if d.confirmed == len(d.ents) {
		// Never reused: a request still held somewhere keeps its bytes.
		d.pending, d.base, d.scopes, d.last, d.lastNum = nil, len(d.ents), nil, scopeDef{}, 0
	}
}

// reader decodes varints; a malformed or short input sets bad.
type reader struct {
	b   []byte
	bad bool
}

// next is u for a field of optional values (checkHeads): 0 once r holds
// no bytes.
func (r *reader) next() uint64 {
	if len(r.b) == 0 {
		return 0
	}
	return r.u()
}

func (r *reader) u() uint64 {
	if b := r.b; len(b) > 0 && b[0] < 0x80 { // a byte: inlined
		r.b = b[1:]
		return uint64(b[0])
	}
	return r.long()
}

// long is u past its first case.
func (r *reader) long() uint64 {
	b := r.b
	if len(b) >= 8 {
		// Eight bytes at once: the varint ends at the first byte whose
		// high bit is clear, and its 7-bit groups are gathered in three
		// steps, with no loop (a count of a billion takes five bytes).
		x := binary.LittleEndian.Uint64(b)
		if end := ^x & 0x8080808080808080; end != 0 {
			n := bits.TrailingZeros64(end)>>3 + 1
			x &= ^uint64(0) >> (64 - 8*n)
			x = x&0x007f007f007f007f | x&0x7f007f007f007f00>>1
			x = x&0x00003fff00003fff | x&0x3fff00003fff0000>>2
			x = x&0x000000000fffffff | x&0x0fffffff00000000>>4
			r.b = b[n:]
			return x
		}
	}
	v, n := binary.Uvarint(b)
	if n <= 0 {
		r.bad = true
		r.b = nil
		return 0
	}
	r.b = b[n:]
	return v
}

func (r *reader) z() int64 { return protowire.DecodeZigZag(r.u()) }

// count reads an unsigned count and checks it is at most MaxCount.
func (r *reader) count() int64 {
	v := r.u()
	if v > uint64(MaxCount) {
		r.bad = true
		return 0
	}
	return int64(v)
}

func (r *reader) str(max int) string {
	n := r.u()
	if r.bad || n > uint64(max) || n > uint64(len(r.b)) {
		r.bad = true
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// readDefs decodes the definitions of req.Dict past the keys the receiver
// holds and appends them to keys.
func readDefs(keys []wireKey, req *peerpb.SyncRequest) ([]wireKey, error) {
	r := reader{b: req.Dict}
	var scopes []wireKey
	for i := int(req.DictBase); len(r.b) > 0; i++ {
		tenant := r.str(MaxKeyBytes)
		num := r.u()
		if num == 0 {
			var sc wireKey
			sc.endpoint = r.str(MaxKeyBytes)
			sc.method = r.str(MaxKeyBytes)
			ms := r.u()
			thr := r.u()
			switch {
			case r.bad:
				return nil, errors.New("dict: truncated scope")
			case ms == 0 || ms > uint64(MaxPeriodMs):
				return nil, fmt.Errorf("dict: period_ms %d out of range 1..%d", ms, MaxPeriodMs)
			case thr>>1 > uint64(MaxCount):
				return nil, fmt.Errorf("dict: threshold %d out of range 0..%d", thr>>1, MaxCount)
			}
			sc.period = time.Duration(ms) * time.Millisecond
			sc.threshold, sc.alg = int64(thr>>1), counters.Algorithm(thr&1)
			scopes = append(scopes, sc)
			num = uint64(len(scopes))
		}
		if r.bad || num > uint64(len(scopes)) {
			return nil, fmt.Errorf("dict: entry %d malformed", i)
		}
		if i < len(keys) {
			continue // defined by an earlier request of the session
		}
		k := scopes[num-1]
		if len(tenant)+len(k.endpoint)+len(k.method) > MaxKeyBytes {
			return nil, fmt.Errorf("dict: entry %d: key longer than %d bytes", i, MaxKeyBytes)
		}
		k.tenant = tenant
		k.hash = counters.SeriesHash(k.tenant, k.endpoint, k.method, k.period)
		keys = append(keys, k)
	}
	return keys, nil
}

// wireReport is one decoded packed report.
type wireReport struct {
	index                          int
	start, back                    int64
	own, demand, cap, known, acked int64
	hasGrant, carry                bool
	knownFrom, capFrom             int
}

// periods holds at_ns/p and MaxInt64/p for the last period p of a batch's
// reports: most series of a batch share their tier's period, and the two
// divisions were half of a report's decoding.
type periods struct{ p, at, max int64 }

// of returns atNs/p and MaxInt64/p. p must not be 0.
func (c *periods) of(atNs, p int64) (at, max int64) {
	if p != c.p {
		c.p, c.at, c.max = p, atNs/p, math.MaxInt64/p
	}
	return c.at, c.max
}

// decode reads the next report of r into w (in place: see readTotal),
// against a dictionary of n keys and the request's names names, checking
// what validReport checks of the unpacked form except the window, which
// place works out from its key's period. decodeChunk decodes a chunk of
// reports, asks for their keys together (touchKeys), then places them: a
// batch's series come in the sender's table order, not in the order it
// defined them, so that each key is a load from memory, and loaded one
// report at a time they waited for it in turn (in TestMillionTenants,
// 13–18% of each process's sync CPU).
func decode(r *reader, prev *int64, n, names int, w *wireReport) error {
	idx := *prev + 1 + r.z()
	w.back = r.z()
	w.own = r.count()
	w.demand = r.count()
	flags := r.u()
	w.hasGrant, w.carry = flags&1 != 0, flags&2 != 0
	kf := flags >> 3
	cf := kf
	if flags&4 == 0 {
		cf = r.u()
	}
	capd := r.z()
	ownAcked := r.z()
	kgAcked := r.z()
	if r.bad {
		return errors.New("truncated")
	}
	if idx < 0 || idx >= int64(n) {
		return fmt.Errorf("index %d out of the dictionary (%d entries)", idx, n)
	}
	*prev = idx
	w.index = int(idx)
	if kf > uint64(names) || cf > uint64(names) {
		return fmt.Errorf("name reference out of range (%d names)", names)
	}
	w.knownFrom, w.capFrom = int(kf), int(cf)
	const m = 1 << 51 // well above MaxCount, well below overflow
	if capd < -m || capd > m || ownAcked < -m || ownAcked > m || kgAcked < -m || kgAcked > m {
		return errors.New("count out of range")
	}
	w.cap = w.own + capd
	w.acked = w.own - ownAcked
	w.known = w.acked + kgAcked
	switch {
	case w.cap < 0 || w.cap > MaxCount:
		return fmt.Errorf("cap %d out of range 0..%d", w.cap, MaxCount)
	case w.known < 0 || w.known > MaxCount || w.acked < 0 || w.acked > w.known:
		return fmt.Errorf("known_global %d / known_acked %d out of range", w.known, w.acked)
	}
	return nil
}

// place works out the start of a decoded report's window from its key's
// period, checking that it is in range. pc holds the batch's last
// divisions (the zero value before its first report).
func (w *wireReport) place(keys []wireKey, atNs int64, pc *periods) error {
	p := int64(keys[w.index].period)
	atP, maxP := pc.of(atNs, p)
	k := atP - w.back
	if w.back > atP || w.back < -(1<<40) || k > maxP {
		return fmt.Errorf("window %d periods before at_ns out of range", w.back)
	}
	w.start = k * p
	return nil
}

// report fills rep (in place: see readTotal) with the decoded report w of
// key k, in the request req.
func (w *wireReport) report(rep *counters.Report, k *wireKey, req *peerpb.SyncRequest) {
	*rep = counters.Report{}
	rep.Key.Tenant, rep.Key.Endpoint, rep.Key.Method = k.tenant, k.endpoint, k.method
	rep.Key.Period, rep.Key.WindowStart = k.period, w.start
	rep.Threshold, rep.Algorithm = k.threshold, k.alg
	rep.Own, rep.Demand, rep.Ack, rep.Final = w.own, w.demand, req.Ack, req.Leaving
	rep.Cap, rep.HasGrant, rep.Carry = w.cap, w.hasGrant, w.carry
	rep.KnownGlobal, rep.KnownAcked = w.known, w.acked
	rep.Series = k.series
	if w.knownFrom > 0 {
		rep.KnownFrom, rep.KnownFromIncarnation = req.Names[w.knownFrom-1], req.NameIncarnations[w.knownFrom-1]
	}
	if w.capFrom > 0 {
		rep.CapFrom, rep.CapFromIncarnation = req.Names[w.capFrom-1], req.NameIncarnations[w.capFrom-1]
	}
}

// touchKeys asks for the keys of the reports ws, with no other work in
// between, so that their loads from memory overlap (see decode).
func touchKeys(keys []wireKey, ws []wireReport) {
	var x byte
	for i := range ws {
		x ^= prefetch.Lines(unsafe.Pointer(&keys[ws[i].index]), unsafe.Sizeof(keys[0]))
	}
	runtime.KeepAlive(x)
}

// decodeChunk decodes and places the next len(ws) reports of r into ws,
// and returns the index in ws of the first that failed, with its error.
func decodeChunk(r *reader, prev *int64, keys []wireKey, atNs int64, names int, ws []wireReport, pc *periods) (int, error) {
	for i := range ws {
		if err := decode(r, prev, len(keys), names, &ws[i]); err != nil {
			return i, err
		}
	}
	touchKeys(keys, ws)
	for i := range ws {
		if err := ws[i].place(keys, atNs, pc); err != nil {
			return i, err
		}
	}
	return 0, nil
}

// handlePacked answers a batch in the packed form; validate has checked
// the rest of the request.
func (e *Engine) handlePacked(now time.Time, req *peerpb.SyncRequest) (*peerpb.SyncResponse, error) {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrBadBatch, fmt.Sprintf(f, a...))
	}
	switch {
	case len(req.Reports) > 0:
		return nil, bad("both reports and packed reports")
	case req.Session == 0:
		return nil, bad("packed reports without a session")
	case req.AtNs <= 0 || req.AtNs > 1<<62:
		return nil, bad("at_ns %d out of range", req.AtNs)
	case len(req.Names) != len(req.NameIncarnations) || len(req.Names) > maxNames:
		return nil, bad("%d names and %d incarnations (max %d)", len(req.Names), len(req.NameIncarnations), maxNames)
	case int(req.PackedCount) > e.cfg.MaxBatch:
		return nil, bad("%d reports, max %d", req.PackedCount, e.cfg.MaxBatch)
	}
	for _, n := range req.Names {
		if n == "" || len(n) > MaxOriginSize {
			return nil, bad("a name must be 1..%d bytes", MaxOriginSize)
		}
	}
	resync := &peerpb.SyncResponse{Incarnation: e.cfg.Incarnation, Resync: req.Session, PackedOk: true}

	// One origin's batches are decoded one at a time; other origins' go on
	// meanwhile.
	e.recvMu.Lock()
	d := e.recv[req.Origin]
	if d == nil {
		d = &recvDict{name: req.Origin}
		e.recv[req.Origin] = d
	}
	e.recvMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	keys := []wireKey(nil)
	switch {
	case d.session != 0 && d.incarnation == req.Incarnation && d.session == req.Session:
		keys = d.keys
	case d.session != 0 && req.Incarnation == d.incarnation && req.Session < d.session:
		return resync, nil // an older session's batch, late: ours is newer
	case req.DictBase != 0:
		// A session this member never saw the start of (it restarted):
		// what it held of the origin is obsolete.
		d.incarnation, d.session, d.keys = 0, 0, nil
		return resync, nil
	}
	if int(req.DictBase) > len(keys) {
		return resync, nil
	}
	keys, err := readDefs(keys, req)
	if err != nil {
		return nil, bad("%v", err)
	}
	if len(keys) > e.dictMax() {
		d.incarnation, d.session, d.keys = 0, 0, nil
		return resync, nil
	}
	// First the whole batch is checked, then counted: a refused batch
	// changes nothing.
	r := reader{b: req.Packed}
	prev := int64(-1)
	var ws [32]wireReport
	var pc periods
	for i := 0; i < int(req.PackedCount); i += len(ws) {
		chunk := ws[:min(len(ws), int(req.PackedCount)-i)]
		if j, err := decodeChunk(&r, &prev, keys, req.AtNs, len(req.Names), chunk, &pc); err != nil {
			return nil, bad("report %d: %v", i+j, err)
		}
	}
	if len(r.b) > 0 {
		return nil, bad("%d bytes after %d reports", len(r.b), req.PackedCount)
	}
	heads, err := checkHeads(req.KnownHeads, int(req.PackedCount))
	if err != nil {
		return nil, bad("known_heads: %v", err)
	}
	d.incarnation, d.session, d.keys = req.Incarnation, req.Session, keys

	resp := &peerpb.SyncResponse{Incarnation: e.cfg.Incarnation, PackedOk: true}
	resp.Seq = e.owner.Hello(now, req.Origin)
	e.owner.PeerMembers(now, req.Origin, int(req.Members))
	out := make([]byte, 0, 16*int(req.PackedCount)+16) // an answer is about 14 bytes
	var outHeads []byte
	r = reader{b: req.Packed}
	prev = -1
	// The reports go to the owner a chunk at a time (Owner.ReportAll).
	var reps [len(ws)]counters.Report
	var ans [len(ws)]counters.Answer
	for i := 0; i < int(req.PackedCount); i += len(ws) {
		chunk := ws[:min(len(ws), int(req.PackedCount)-i)]
		decodeChunk(&r, &prev, keys, req.AtNs, len(req.Names), chunk, &pc) // checked above
		for j := range chunk {
			k := &keys[chunk[j].index]
			chunk[j].report(&reps[j], k, req)
			reps[j].KnownHead = int64(heads.next())
			if e.cfg.Central == "" {
				owner, _ := e.ring.Owner(k.hash)
				if reps[j].Stray = owner != e.cfg.Name; reps[j].Stray {
					stray(resp, i+j, owner)
				}
			}
		}
		n := len(chunk)
		e.owner.ReportAll(now, d.name, req.Incarnation, reps[:n], ans[:n])
		for j := range reps[:n] {
			keys[chunk[j].index].series = reps[j].Series
			out = appendTotal(out, reps[j].Own, ans[j])
			if ans[j].Head > 0 && outHeads == nil {
				outHeads = make([]byte, i+j, int(req.PackedCount)+8) // a zero head is one byte of 0
			}
			if outHeads != nil {
				outHeads = binary.AppendUvarint(outHeads, uint64(ans[j].Head))
			}
		}
		clear(reps[:n]) // keeps no strings or series alive
	}
	// Only now: see counters.Owner.Acknowledge.
	e.owner.Acknowledge(now, req.Origin, req.Ack, req.View, req.AckCovers)
	resp.Packed, resp.Heads = out, outHeads
	return resp, nil
}

// dictMax bounds an origin's dictionary on this member: twice the windows
// its owner aggregates, plus a batch.
func (e *Engine) dictMax() int {
	w := e.cfg.OwnerWindows
	if w <= 0 {
		w = 200_000
	}
	return 2*w + e.cfg.MaxBatch
}

func appendTotal(b []byte, own int64, a counters.Answer) []byte {
	b = binary.AppendUvarint(b, uint64(a.Global))
	var flags uint64
	if a.HasGrant {
		flags |= 1
	}
	if a.Carry {
		flags |= 2
	}
	if a.Prompt {
		flags |= 4 // earlier versions ignore it
	}
	b = binary.AppendUvarint(b, flags)
	if a.HasGrant {
		b = binary.AppendUvarint(b, protowire.EncodeZigZag(a.Grant-own))
	}
	return binary.AppendUvarint(b, protowire.EncodeZigZag(a.Spare))
}

// readTotal decodes one total of a packed answer into a. It fills a in
// place rather than returning it: a struct built field by field and then
// copied whole made the copy wait for its stores (store forwarding), a good
// part of the decoding.
func readTotal(r *reader, own int64, a *counters.Answer) {
	a.Global = int64(r.u())
	flags := r.u()
	a.HasGrant, a.Carry, a.Prompt = flags&1 != 0, flags&2 != 0, flags&4 != 0
	a.Grant = 0
	if a.HasGrant {
		a.Grant = own + r.z()
	}
	a.Spare = r.z()
}

// applyPacked records an owner's answer to a batch in the packed form.
func (e *Engine) applyPacked(now time.Time, b *Batch, resp *peerpb.SyncResponse) error {
	if resp.GetResync() != 0 {
		// Not an error: the owner counted nothing, and the counts go again,
		// with their definitions, at the next interval.
		e.wireMu.Lock()
		if d := e.dicts[b.Owner]; d != nil && d.session == resp.Resync {
			e.newDict(b.Owner)
			e.resyncs.Add(1)
		}
		e.wireMu.Unlock()
		e.Fail(now, b)
		return nil
	}
	if !resp.PackedOk {
		// A member that does not decode the packed form (an older version):
		// the next batches to it are unpacked.
		if l := (*e.links.Load())[b.Owner]; l != nil {
			l.packed.Store(false)
		}
		e.Fail(now, b)
		return fmt.Errorf("node: owner %s does not decode packed batches; sending it unpacked ones", b.Owner)
	}
	r := reader{b: resp.GetPacked()}
	var a counters.Answer
	for i := range b.refs {
		readTotal(&r, b.refs[i].own, &a)
	}
	if r.bad || len(r.b) > 0 || len(resp.Totals) > 0 {
		e.Fail(now, b)
		return fmt.Errorf("node: owner %s answered a malformed packed answer for %d reports", b.Owner, len(b.refs))
	}
	heads, err := checkHeads(resp.GetHeads(), len(b.refs))
	if err != nil {
		e.Fail(now, b)
		return fmt.Errorf("node: owner %s answered malformed heads: %v", b.Owner, err)
	}
	after, err := e.declineAfter(resp, len(b.refs))
	if err != nil {
		e.Fail(now, b)
		return fmt.Errorf("node: owner %s answered a malformed packed answer: %v", b.Owner, err)
	}
	e.wireMu.Lock()
	e.acknowledged(b.Owner, b.enc)
	e.wireMu.Unlock()
	nowNs := now.UnixNano()
	e.answeredBy(b.Owner, nowNs)
	r = reader{b: resp.Packed}
	from := e.table.PeerID(b.Owner, resp.Incarnation)
	for i := range b.refs {
		if i%32 == 0 {
			touch(b.refs[i:min(i+32, len(b.refs))])
		}
		readTotal(&r, b.refs[i].own, &a)
		a.Head = int64(heads.next())
		apply(e.table, nowNs, &b.refs[i], &a, from, declined(after, i), false)
	}
	e.acknowledge(b.Owner, resp.Seq)
	return nil
}

// pruneDicts forgets this member's dictionaries for members out of the
// view (one that comes back, restarted or not, gets a new session, which
// it cannot refuse), and the received dictionaries of members no longer
// remembered at all.
func (e *Engine) pruneDicts(alive []string, gone map[string]int64) {
	known := func(m string) bool {
		_, g := gone[m]
		return g || slices.Contains(alive, m)
	}
	e.wireMu.Lock()
	for m := range e.dicts {
		if !slices.Contains(alive, m) {
			delete(e.dicts, m)
		}
	}
	e.wireMu.Unlock()
	e.recvMu.Lock()
	for m := range e.recv {
		if !known(m) {
			delete(e.recv, m)
		}
	}
	e.recvMu.Unlock()
}
