package session

import (
	"fmt"
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
			s := m.NewState(n + 8)
			t0 := time.Now()
			if err := m.Forward(s, tokenIDs(n, 3, d.Vocab), model.NoLogits, nil); err != nil {
				b.Fatal(err)
			}
			prefill := time.Since(t0)
			path := filepath.Join(b.TempDir(), "s.snap")
			var save, restore time.Duration
			var size int64
			for range b.N {
				t1 := time.Now()
				size, err = WriteFile(path, fp, m.Export(s))
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
			b.ReportMetric(float64(prefill)/float64(restore), "prefill/restore")
			s.Free(m.Backend())
		})
	}
}
