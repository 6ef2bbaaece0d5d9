package backend

// MappedRegion is read-only host memory holding weights: a checkpoint
// shard's memory map.
type MappedRegion struct {
	Name    string // the file, for messages
	Data    []byte // the whole region, starting on a page
	Largest int64  // bytes of the largest tensor in it
}

// RegionMapper is a backend that can bind a matrix lying in a memory-mapped
// region in place rather than copy it (Metal, whose GPU reads host memory
// on Apple silicon). The engine calls MapRegions with a checkpoint's maps
// before it uploads the checkpoint's matrices, and release before it
// unmaps them; matrices bound in place are invalid after release. A
// backend may choose to copy anyway (an option, a matrix its kernels
// cannot bind where it lies).
type RegionMapper interface {
	MapRegions(regions []MappedRegion) (release func() error, err error)
}
