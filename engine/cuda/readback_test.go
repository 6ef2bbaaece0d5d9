package cuda

import (
	"testing"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
)

// The read-back rules, on the host: which queued piece a read waits for.
func TestReadbackWaitsForTheLastWriter(t *testing.T) {
	a, c := &memory{p: 0x1000, bytes: 64}, &memory{p: 0x2000, bytes: 64}
	ev := []*driver.Event{{}, {}, {}}
	prog := []*program{{done: ev[0]}, {done: ev[1]}, {done: ev[2]}} // the runs whose markers those are
	bufA := backend.Buffer{Mem: a, Len: 2, Type: backend.I32}
	bufA2 := backend.Buffer{Mem: a, Offset: 2, Len: 2, Type: backend.I32} // the next 8 bytes of a
	bufC := backend.Buffer{Mem: c, Len: 16, Type: backend.F32}

	var r readback
	if e, ok, _ := r.after(spanOf(bufA)); !ok || e != nil {
		t.Fatalf("nothing queued: got (%v, %v), want to copy at once", e, ok)
	}
	r.queued(spans([]backend.Buffer{bufA}), prog[0])  // step n writes a[0:2]
	r.queued(spans([]backend.Buffer{bufA2}), prog[1]) // step n+1 writes a[2:4]
	if e, ok, done := r.after(spanOf(bufA)); !ok || e != ev[0] || done != 1 {
		t.Errorf("reading what step n wrote: got (%p, %v, %d), want step n's marker, 1 piece done", e, ok, done)
	}
	if _, ok, _ := r.after(spanOf(bufA2)); ok {
		t.Errorf("reading what the last piece wrote took the side stream; the stream's order is as fast")
	}
	if e, ok, _ := r.after(spanOf(bufC)); !ok || e != nil {
		t.Errorf("reading a buffer nothing queued writes: got (%v, %v), want to copy at once", e, ok)
	}
	r.queued(spans([]backend.Buffer{bufC}), nil) // a copy into c: no marker
	r.queued(nil, prog[2])
	if _, ok, _ := r.after(spanOf(bufC)); ok {
		t.Errorf("the last writer has no marker, and the read did not wait for everything")
	}
	r.settled()
	if e, ok, _ := r.after(spanOf(bufA)); !ok || e != nil {
		t.Errorf("after settling: got (%v, %v), want to copy at once", e, ok)
	}

	// past maxPending the oldest piece is forgotten: a read that finds no
	// writer waits for the oldest kept
	r.queued(spans([]backend.Buffer{bufC}), prog[0])
	for range maxPending {
		r.queued(nil, prog[1])
	}
	if len(r.queue) != maxPending || !r.older {
		t.Fatalf("queue of %d (older %v) after %d pieces, want %d and older", len(r.queue), r.older, maxPending+1, maxPending)
	}
	if e, ok, done := r.after(spanOf(bufC)); !ok || e != ev[1] || done != 1 {
		t.Errorf("its writer forgotten: got (%p, %v, %d), want the oldest kept piece's marker", e, ok, done)
	}
}

func TestSpansMergeTouchingRanges(t *testing.T) {
	a, c := &memory{p: 0x1000, bytes: 256}, &memory{p: 0x2000, bytes: 256}
	got := spans([]backend.Buffer{
		{Mem: c, Offset: 4, Len: 4, Type: backend.F32},
		{Mem: a, Offset: 8, Len: 8, Type: backend.F32}, // bytes 32..64
		{Mem: a, Offset: 0, Len: 8, Type: backend.F32}, // bytes 0..32, touching
		{Mem: a, Offset: 40, Len: 2, Type: backend.BF16},
		{Mem: a, Offset: 0, Len: 0, Type: backend.F32}, // empty
		{Len: 3, Type: backend.F32},                    // no memory
	})
	want := []span{{a, 0, 64}, {a, 80, 84}, {c, 16, 32}}
	if len(got) != len(want) {
		t.Fatalf("spans %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("span %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// On the GPU: a read of what a program wrote returns while a longer program
// queued after it still runs, with the right values; reads of what a Write
// or the last program wrote wait as before.
func TestReadWaitsOnlyForItsWriter(t *testing.T) {
	b := testBackend(t, DefaultOptions())
	pos := ints(b, []int32{41})
	const rows, dim = 2048, 8192
	h := floats(b, make([]float32, rows*dim))
	ones := make([]float32, dim)
	for i := range ones {
		ones[i] = 1
	}
	w := floats(b, ones)
	out := floats(b, make([]float32, rows*dim))
	step, err := b.Compile([]backend.Op{&backend.Advance{Pos: pos, By: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var heavy []backend.Op // some tens of milliseconds of norms that do not touch pos
	for range 400 {
		heavy = append(heavy, &backend.AddRMSNorm{H: h, Weight: w, Out: out, Rows: rows, Dim: dim, Eps: 1e-6})
	}
	long, err := b.Compile(heavy)
	if err != nil {
		t.Fatal(err)
	}
	for run := range 3 { // the third replays both as graphs
		if err := step.Run(); err != nil {
			t.Fatal(err)
		}
		if err := long.Run(); err != nil {
			t.Fatal(err)
		}
		if got, want := readInts(t, b, pos)[0], int32(41+2*(run+1)); got != want {
			t.Fatalf("run %d: read %d, want %d", run, got, want)
		}
		finished, err := long.(*program).done.Done()
		if err != nil {
			t.Fatal(err)
		}
		if finished {
			t.Errorf("run %d: the read of pos waited for the program queued after its writer", run)
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	// a Write is a writer without a marker: the read after it waits for all
	if err := b.WriteInts(pos, []int32{7}); err != nil {
		t.Fatal(err)
	}
	if err := long.Run(); err != nil {
		t.Fatal(err)
	}
	if got := readInts(t, b, pos)[0]; got != 7 {
		t.Fatalf("read %d after writing 7", got)
	}
	if finished, _ := long.(*program).done.Done(); !finished {
		t.Errorf("the read of a written buffer returned before the work queued before it")
	}
	// the last program's own output
	if err := b.Write(h, randoms(freshRNG(t), rows*dim, 1)); err != nil {
		t.Fatal(err)
	}
	if err := long.Run(); err != nil {
		t.Fatal(err)
	}
	got := read(t, b, out)
	if got[0] == 0 || got[len(got)-1] == 0 {
		t.Errorf("the norm's output read as zeros (%v .. %v): the read did not wait for its writer", got[0], got[len(got)-1])
	}
}
