package decode_test

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"petal/engine/checkpoint"
	"petal/engine/cpu"
	"petal/engine/decode"
	"petal/engine/model"
	"petal/engine/sample"
	"petal/fixtures"
)

// embedded loads the embedded default model and a state holding a
// 32-token prompt, its last row of logits left on the device.
func embedded(tb testing.TB) (*model.Model, *model.State) {
	tb.Helper()
	dir, err := fixtures.DefaultModel(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ck.Close() })
	m, err := model.Load(ck, cpu.New(), 16)
	if err != nil {
		tb.Fatal(err)
	}
	s := m.NewState(1 << 16)
	prompt := make([]int32, 32)
	for i := range prompt {
		prompt[i] = int32(100 + 37*i)
	}
	if err := m.Forward(s, prompt, model.DeviceLogits, nil); err != nil {
		tb.Fatal(err)
	}
	return m, s
}

// TestDecodeStepAllocatesNothing: once warmed up, a step of the loop
// (greedy or sampled, the program run and the 8-byte status read) makes
// no allocation on the CPU.
func TestDecodeStepAllocatesNothing(t *testing.T) {
	m, s := embedded(t)
	if err := m.Reserve(s, 4096); err != nil {
		t.Fatal(err)
	}
	s.Tokens = slices.Grow(s.Tokens, 4096)
	for name, p := range map[string]sample.Params{
		"greedy":  {},
		"sampled": {Temperature: 0.8, TopK: 20, TopP: 0.9, RepetitionPenalty: 1.1, Seed: 3},
	} {
		run := func(steps int) func() {
			return func() {
				n := 0
				err := decode.Run(context.Background(), m, s, decode.Options{Sampling: p, MaxFeeds: steps}, s.Tokens[len(s.Tokens)-1],
					func(decode.Token) bool { n++; return n < steps })
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		short, long := testing.AllocsPerRun(3, run(4)), testing.AllocsPerRun(3, run(36))
		t.Logf("%s: %.1f allocations in 4 steps, %.1f in 36", name, short, long)
		if long > short {
			t.Errorf("%s: %.1f allocations for 32 more steps, want 0", name, long-short)
		}
	}
}

// BenchmarkDecode: tokens/s of greedy decode steps on the embedded model,
// the loop before (a forward pass reading the logits back, a finiteness
// check and an argmax on the host) and the shared loop (sampling on the
// device, an 8-byte read).
func BenchmarkDecode(b *testing.B) {
	m, s := embedded(b)
	start := m.Export(s)
	// every run starts from the same 32-token state: attention's cost
	// grows with the position
	fresh := func(b *testing.B) *model.State {
		st, err := m.Import(start, 1<<16)
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Reserve(st, 4096); err != nil {
			b.Fatal(err)
		}
		if err := m.Forward(st, st.Tokens[len(st.Tokens)-1:], model.DeviceLogits, nil); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		return st
	}
	// the process's CPU time per step: steadier than the wall clock on a
	// loaded machine (run with GOMAXPROCS=1)
	cpuTime := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.Run("forward+host-argmax", func(b *testing.B) {
		st := fresh(b)
		t0 := cpuTime()
		tok := []int32{st.Tokens[len(st.Tokens)-1]}
		pick := func(_ int, row []float32) {
			if sample.Finite(row) {
				tok[0] = sample.Argmax(row)
			}
		}
		for range b.N {
			if err := m.Forward(st, tok, model.LastLogits, pick); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		b.ReportMetric(float64(cpuTime()-t0)/float64(b.N), "cpu-ns/op")
	})
	b.Run("decode-loop", func(b *testing.B) {
		st := fresh(b)
		t0 := cpuTime()
		n := 0
		err := decode.Run(context.Background(), m, st, decode.Options{MaxFeeds: b.N}, st.Tokens[len(st.Tokens)-1],
			func(decode.Token) bool { n++; return n < b.N })
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
		b.ReportMetric(float64(cpuTime()-t0)/float64(b.N), "cpu-ns/op")
	})
}
