package session

import (
	"fmt"
	"testing"
	"time"

	"petal/engine/model"
)

// Measured on the 2-core AMD EPYC development machine (ext4 disk), with
// go test ./engine/session -run '^$' -bench . -benchtime 20x:
//
//	             snapshot  save (incl. 2 fsyncs)  restore (read, verify, import)  prefill
//	1024 tokens  7.49 MB   55 ms                  3.1 ms                          5.3 s
//	4096 tokens  20.1 MB   67 ms                  19 ms                           47 s
//
// Restoring costs 1/1700 (1K) and 1/2500 (4K) of prefilling the same tokens.

// benchStates caches, per context length, the oracle state after a prefill
// and how long the prefill took, shared by the save and restore benchmarks.
var benchStates = map[int]struct {
	data    model.StateData
	prefill time.Duration
}{}

var benchLengths = []int{1024, 4096}

func benchState(b *testing.B, m *model.Model, n int) (model.StateData, time.Duration) {
	if c, ok := benchStates[n]; ok {
		return c.data, c.prefill
	}
	s := m.NewState(n)
	start := time.Now()
	if err := m.Forward(s, tokenIDs(n, 11, m.Dims.Vocab), model.NoLogits, nil); err != nil {
		b.Fatal(err)
	}
	prefill := time.Since(start)
	d := snapshot(b, m, s)
	benchStates[n] = struct {
		data    model.StateData
		prefill time.Duration
	}{d, prefill}
	return d, prefill
}

// BenchmarkSave: export an oracle state and save it as a session turn
// (write, fsync, rename, fsync of the folder). Reports the snapshot size
// and how many saves fit in the time of prefilling the same tokens.
func BenchmarkSave(b *testing.B) {
	m, fp := loadOracle(b)
	for _, n := range benchLengths {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			_, prefill := benchState(b, m, n)
			s, err := m.Import(benchStates[n].data, n)
			if err != nil {
				b.Fatal(err)
			}
			st := openTestStore(b, fp, StoreOptions{Retention: 1})
			var size int64
			b.ResetTimer()
			for b.Loop() {
				info, err := st.SaveTurn("bench", snapshot(b, m, s))
				if err != nil {
					b.Fatal(err)
				}
				size = info.Bytes
			}
			perOp := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(size)/1e6, "MB")
			b.ReportMetric(prefill.Seconds()*1e3, "prefill-ms")
			b.ReportMetric(float64(prefill)/float64(perOp), "prefill/save")
		})
	}
}

// BenchmarkRestore: read and verify a saved turn and import it into a new
// model state, against the time of prefilling the same tokens.
func BenchmarkRestore(b *testing.B) {
	m, fp := loadOracle(b)
	for _, n := range benchLengths {
		b.Run(fmt.Sprintf("tokens=%d", n), func(b *testing.B) {
			d, prefill := benchState(b, m, n)
			st := openTestStore(b, fp, StoreOptions{})
			info, err := st.SaveTurn("bench", d)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				r, err := st.Latest("bench")
				if err != nil {
					b.Fatal(err)
				}
				s, err := m.Import(r.Data, n)
				if err != nil {
					b.Fatal(err)
				}
				s.Free(m.Backend())
			}
			perOp := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(info.Bytes)/1e6, "MB")
			b.ReportMetric(prefill.Seconds()*1e3, "prefill-ms")
			b.ReportMetric(float64(prefill)/float64(perOp), "prefill/restore")
		})
	}
}
