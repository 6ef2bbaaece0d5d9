package session

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"petal/engine/cpu"
	"petal/engine/model"
)

// BenchmarkSnapshotShape measures snapshots of a synthetic model of a named
// shape (random 4-bit weights, no checkpoint file): the time to prefill N
// tokens, and to save and restore the resulting state. It needs the
// weights' memory (about 20 GB for qwen3.6-35b-a3b), so it runs only when
// asked:
//
//	PETAL_BENCH_SHAPE=qwen3.6-35b-a3b go test ./engine/session -run '^$' -bench SnapshotShape -benchtime 1x
//
// With PETAL_BENCH_PREFILL=0 the state is random (of the same size: saving
// and restoring cost the same) instead of prefilled, and prefill-s is 0.
func BenchmarkSnapshotShape(b *testing.B) {
	shape := os.Getenv("PETAL_BENCH_SHAPE")
	if shape == "" {
		b.Skip("set PETAL_BENCH_SHAPE to a synthetic shape (e.g. qwen3.6-35b-a3b) to run")
	}
	d, err := model.NamedDims(shape)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	m, err := model.Synthetic(d, cpu.New(), 512, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: synthetic weights (%.1f GB) built in %s", shape, float64(model.SyntheticWeightBytes(d))/1e9, time.Since(start).Round(time.Millisecond))
	fp := testFP(7)
	for _, n := range []int{1024, 4096} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var s *model.State
			var prefill time.Duration
			if os.Getenv("PETAL_BENCH_PREFILL") == "0" {
				s, err = m.Import(randomState(&d, n), n+8)
				if err != nil {
					b.Fatal(err)
				}
			} else {
				s = m.NewState(n + 8)
				t0 := time.Now()
				if err := m.Forward(s, tokenIDs(n, 3, d.Vocab), model.NoLogits, nil); err != nil {
					b.Fatal(err)
				}
				prefill = time.Since(t0)
			}
			path := filepath.Join(b.TempDir(), "s.snap")
			var save, restore time.Duration
			var size int64
			for range b.N {
				t1 := time.Now()
				size, err = WriteFile(path, fp, snapshot(b, m, s))
				if err != nil {
					b.Fatal(err)
				}
				save += time.Since(t1)
				t2 := time.Now()
				data, err := ReadFile(path, fp)
				if err != nil {
					b.Fatal(err)
				}
				r, err := m.Import(data, n+8)
				if err != nil {
					b.Fatal(err)
				}
				restore += time.Since(t2)
				r.Free(m.Backend())
			}
			save /= time.Duration(b.N)
			restore /= time.Duration(b.N)
			b.ReportMetric(float64(size)/1e6, "MB")
			b.ReportMetric(float64(save.Milliseconds()), "save-ms")
			b.ReportMetric(float64(restore.Milliseconds()), "restore-ms")
			b.ReportMetric(prefill.Seconds(), "prefill-s")
			if prefill > 0 {
				b.ReportMetric(float64(prefill)/float64(restore), "prefill/restore")
			}
			s.Free(m.Backend())
		})
	}
}

// randomState is a state of n tokens of the model's sizes with random values.
func randomState(d *model.Dims, n int) model.StateData {
	rng := rand.New(rand.NewPCG(uint64(n), 5))
	fill := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = rng.Float32() - 0.5
		}
		return v
	}
	s := model.StateData{Tokens: tokenIDs(n, 3, d.Vocab),
		K: make([][]float32, d.Layers), V: make([][]float32, d.Layers),
		Conv: make([][]float32, d.Layers), Recur: make([][]float32, d.Layers)}
	for i, full := range d.Full {
		if full {
			s.K[i], s.V[i] = fill(n*d.KVHeads*d.HeadDim), fill(n*d.KVHeads*d.HeadDim)
		} else {
			s.Conv[i], s.Recur[i] = fill((d.ConvK-1)*d.ConvChannels()), fill(d.ValueHeads*d.ValueDim*d.KeyDim)
		}
	}
	return s
}
