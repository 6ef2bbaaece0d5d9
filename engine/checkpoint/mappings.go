package checkpoint

// Mapping is one shard's memory map, for a backend that binds weights in
// place rather than copying them (Metal on Apple silicon's unified
// memory).
type Mapping struct {
	File    string // relative to the checkpoint folder
	Data    []byte // the whole file, read-only, starting on a page
	Largest int64  // bytes of the largest tensor in it
}

// Mappings lists the memory maps of the shards, in the shards' order; none
// for a checkpoint read into memory (OpenFS, or a system without mmap).
// Every Tensor's Data of a listed shard lies inside its Data. They stay
// valid until Close: whatever wraps them must let go first.
func (c *Checkpoint) Mappings() []Mapping {
	var out []Mapping
	for _, f := range c.files {
		if !f.mapped {
			continue
		}
		m := Mapping{File: f.Path, Data: f.data}
		for _, t := range f.tensors {
			m.Largest = max(m.Largest, int64(len(t.Data)))
		}
		out = append(out, m)
	}
	return out
}
