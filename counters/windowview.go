package counters

import "slices"

// windowView aligns a window's origins with the members that may spend in
// it (a memberWindow), so that a grant walks the members without looking
// each one up by name: cur[i] and prv[i] are member mw.names[i]'s states in
// the window and in the window before it (nil where it has not reported),
// outside the window's origins that are not members, and prevOutside the
// previous window's origins that are neither members nor origins of the
// window. nCur and nPrev are how many origins the two windows had when it
// was brought up to date.
type windowView struct {
	mw                   *memberWindow
	prev                 *ownerWindow
	nCur, nPrev          int
	cur, prv             []*originState
	outside, prevOutside []*originState
	slots                windowSlots // the members' slots in grants (see slotsFor)
}

// aligned returns the window's view on mw, with prev its previous window
// (nil if the owner has none), or nil while the window has too few origins
// for a view to pay for its memory (two pointers per member). New origins
// of the window are added in place; anything else rebuilds it. The owner's
// lock must be held.
func (w *ownerWindow) aligned(mw *memberWindow, prev *ownerWindow) *windowView {
	if len(w.origins) <= originsScan || 12*len(w.origins) < len(mw.names) {
		return nil
	}
	prevN := 0
	if prev != nil {
		prevN = len(prev.origins)
	}
	v := w.view
	if v == nil {
		v = &windowView{}
		w.view = v
	}
	if v.mw != mw || v.prev != prev || v.nPrev != prevN || v.nCur > len(w.origins) {
		v.mw, v.prev, v.nPrev, v.nCur = mw, prev, prevN, 0
		v.cur = append(v.cur[:0], make([]*originState, len(mw.names))...)
		v.prv = append(v.prv[:0], make([]*originState, len(mw.names))...)
		v.outside, v.prevOutside = v.outside[:0], v.prevOutside[:0]
		if prev != nil {
			for _, ps := range prev.origins {
				if i, ok := mw.pos[ps.name]; ok {
					v.prv[i] = ps
				} else if w.find(ps.name) == nil {
					v.prevOutside = append(v.prevOutside, ps)
				}
			}
		}
	}
	for _, s := range w.origins[v.nCur:] {
		if i, ok := mw.pos[s.name]; ok {
			v.cur[i], s.vpos = s, int32(i)
			continue
		}
		v.outside = append(v.outside, s)
		v.prevOutside = slices.DeleteFunc(v.prevOutside, func(ps *originState) bool { return ps.name == s.name })
	}
	v.nCur = len(w.origins)
	return v
}
