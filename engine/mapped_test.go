package engine_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"petal/engine"
	"petal/engine/backend"
	"petal/engine/cpu"
	"petal/engine/quant"
)

const fixtureDir = "../fixtures/tiny-qwen36-moe-4bit"

// regionBackend is the CPU backend with a RegionMapper that records what
// the engine hands it and when.
type regionBackend struct {
	*cpu.Backend
	regions   []backend.MappedRegion
	heads     [][]byte // each region's first bytes when it was handed over
	uploads   int      // matrices uploaded after MapRegions
	inside    int      // of them, those whose words lie in a region
	released  int
	failAt    int // Upload fails at this upload (1-based); 0 never
	onRelease func()
}

func (b *regionBackend) MapRegions(rs []backend.MappedRegion) (func() error, error) {
	b.regions = rs
	for _, r := range rs {
		b.heads = append(b.heads, bytes.Clone(r.Data[:min(len(r.Data), 64)]))
	}
	return func() error {
		b.released++
		// still mapped: the bytes read as they did (an unmapped region faults here)
		for i, r := range b.regions {
			if !bytes.Equal(r.Data[:len(b.heads[i])], b.heads[i]) {
				return errors.New("a region changed before release")
			}
		}
		if b.onRelease != nil {
			b.onRelease()
		}
		return nil
	}, nil
}

func (b *regionBackend) Upload(m quant.Matrix) (backend.Matrix, error) {
	b.uploads++
	if b.uploads == b.failAt {
		return nil, errors.New("an upload that fails")
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(m.Words)))
	for _, r := range b.regions {
		base := uintptr(unsafe.Pointer(unsafe.SliceData(r.Data)))
		if p >= base && p+4*uintptr(len(m.Words)) <= base+uintptr(len(r.Data)) {
			b.inside++
		}
	}
	return b.Backend.Upload(m)
}

// TestOpenHandsMappedRegions: a backend that maps regions gets the
// checkpoint's shards before the matrices (whose words lie in them), and
// lets go of them before the checkpoint unmaps them, at Close and when
// Open fails after handing them over.
func TestOpenHandsMappedRegions(t *testing.T) {
	be := &regionBackend{Backend: cpu.New()}
	e, err := engine.Open(fixtureDir, engine.Options{Backend: be, Chunk: 16})
	if err != nil {
		t.Fatal(err)
	}
	if len(be.regions) != 2 {
		t.Fatalf("%d regions, want the fixture's 2 shards", len(be.regions))
	}
	for _, r := range be.regions {
		if r.Largest <= 0 || !strings.HasSuffix(r.Name, ".safetensors") {
			t.Errorf("region %q, largest tensor %d bytes", r.Name, r.Largest)
		}
	}
	if be.uploads == 0 || be.inside != be.uploads {
		t.Errorf("%d of %d matrices uploaded have their words in a region handed over", be.inside, be.uploads)
	}
	var mappedAtRelease int
	be.onRelease = func() { mappedAtRelease = len(e.Checkpoint.Mappings()) }
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if be.released != 1 || mappedAtRelease != 2 {
		t.Errorf("released %d times, with %d shards still mapped; want once, before the 2 are unmapped", be.released, mappedAtRelease)
	}

	failing := &regionBackend{Backend: cpu.New(), failAt: 3}
	if _, err := engine.Open(fixtureDir, engine.Options{Backend: failing, Chunk: 16}); err == nil {
		t.Fatal("an upload failed, but Open did not")
	}
	if failing.released != 1 {
		t.Errorf("a failed Open released the regions %d times, want once", failing.released)
	}
}

// TestOpenWithoutRegionMapper: the CPU backend (no RegionMapper) opens
// and closes as before.
func TestOpenWithoutRegionMapper(t *testing.T) {
	e, err := engine.Open(fixtureDir, engine.Options{Backend: cpu.New(), Chunk: 16})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}
