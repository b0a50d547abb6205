package health

import "math/bits"

// nodeTable is the check's table of the nodes it looked up, in front of
// evidence.seen, for the one lookup per pod that a quiet check with node
// evidence makes (see screen). It is an open-addressing hash table keyed
// by a name's length and its first and last eight bytes: cheaper per pod
// than a map, which hashes and compares whole names, and exact for names of
// up to 16 bytes; longer ones are compared in full when those match. Names
// are never empty. A nodeTable belongs to one check.
type nodeTable struct {
	slots []nodeSlot // a power of two long, at most half full; nil when empty
	shift int        // 64 minus the log2 of len(slots)
	used  int
}

type nodeSlot struct {
	name       string // "" for a free slot
	head, tail uint64
	suspect    bool
}

// nameKey returns the first and the last eight bytes of name, little
// endian (the bytes of a shorter name in head, and tail zero).
func nameKey(name string) (head, tail uint64) {
	if len(name) < 8 {
		for i := 0; i < len(name); i++ {
			head |= uint64(name[i]) << (8 * i)
		}
		return head, 0
	}
	return le64(name[:8]), le64(name[len(name)-8:])
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// slotOf returns the first slot to probe for a name: the top bits of a
// product, which depend on every bit of the key.
func (t *nodeTable) slotOf(head, tail uint64, n int) int {
	h := (head ^ bits.RotateLeft64(tail, 32) ^ uint64(n)) * 0x9e3779b97f4a7c15
	return int(h >> t.shift)
}

// suspect returns whether the table says the named node is suspect (see
// check.suspectNode), and whether
// it holds the name at all.
func (t *nodeTable) suspect(name string) (suspect, ok bool) {
	if t.used == 0 {
		return false, false
	}
	head, tail := nameKey(name)
	mask := len(t.slots) - 1
	for i := t.slotOf(head, tail, len(name)); ; i = (i + 1) & mask {
		s := &t.slots[i]
		switch {
		case s.name == "":
			return false, false
		case s.head == head && s.tail == tail && len(s.name) == len(name) && (len(name) <= 16 || s.name == name):
			return s.suspect, true
		}
	}
}

// put records whether the named node, which the table does not hold, is
// suspect.
func (t *nodeTable) put(name string, suspect bool) {
	if 2*(t.used+1) > len(t.slots) {
		old := t.slots
		t.slots = make([]nodeSlot, max(16, 2*len(old)))
		t.shift = 64 - bits.TrailingZeros(uint(len(t.slots)))
		t.used = 0
		for i := range old {
			if old[i].name != "" {
				t.insert(old[i])
			}
		}
	}
	head, tail := nameKey(name)
	t.insert(nodeSlot{name: name, head: head, tail: tail, suspect: suspect})
}

func (t *nodeTable) insert(s nodeSlot) {
	mask := len(t.slots) - 1
	i := t.slotOf(s.head, s.tail, len(s.name))
	for t.slots[i].name != "" {
		i = (i + 1) & mask
	}
	t.slots[i] = s
	t.used++
}

// reset empties the table, keeping its room for the next check.
func (t *nodeTable) reset() {
	if t.used > 0 {
		clear(t.slots)
		t.used = 0
	}
}
