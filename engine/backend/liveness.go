package backend

// Covers reports whether b holds all of o: the same memory, o's elements
// within b's.
func (b Buffer) Covers(o Buffer) bool {
	return b.Mem != nil && b.Mem == o.Mem && b.Offset <= o.Offset && o.Offset+o.Len <= b.Offset+b.Len
}

// Overwritten reports whether what ops[i] writes to buf is written over by
// a later op of the same run before any op but ops[reader] reads any of
// it: an op's reads count before its writes, and only an op writing all of
// buf ends its life. A value still there when the run ends counts as read
// (another run, or another program, may read it), so that a backend that
// leaves such a value unwritten (a fused norm's float32 output, whose
// reader took a copy of its own) changes nothing any op sees.
func Overwritten(ops []Op, i int, buf Buffer, reader int) bool {
	for j := i + 1; j < len(ops); j++ {
		r, w := ops[j].Access()
		if j != reader {
			for _, x := range r {
				if x.Overlaps(buf) {
					return false
				}
			}
		}
		for _, x := range w {
			if x.Covers(buf) {
				return true
			}
		}
	}
	return false
}
