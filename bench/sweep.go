package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"petal/engine/decode"
	"petal/engine/model"
	"petal/engine/sample"
)

// sweep runs the measurements of one Run on one model.
type sweep struct {
	m   *model.Model
	o   Options
	rng *rand.Rand
	r   *Report // the report being made: floors and peak memory go into it

	// kept is the state the last prefill left, reused as the start of the
	// decode measurement at the same length when decode starts from
	// prefilled states.
	kept *model.State
}

// newRand is the sweep's generator for prompts and states.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x62656e6368)) }

// room is the state capacity a measurement at length n needs: n tokens,
// then the untimed first decode step and the timed ones.
func (sw *sweep) room(n int) int { return n + 1 + sw.o.DecodeTokens }

func (sw *sweep) tokens(n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(sw.rng.IntN(sw.m.Dims.Vocab))
	}
	return t
}

// warmUp runs a short prompt and a few decode steps so the first real
// measurement does not pay for first-use allocations.
func (sw *sweep) warmUp() error {
	s := sw.m.NewState(64)
	defer s.Free(sw.m.Backend())
	if err := sw.m.Forward(s, sw.tokens(16), model.LastLogits, func(int, []float32) {}); err != nil {
		return err
	}
	_, err := decodeSteps(context.Background(), sw.m, s, 3, sw.o.Sampling)
	return err
}

// prefill times Repeats fresh prompts of n tokens.
func (sw *sweep) prefill(ctx context.Context, n int) (*Prefill, error) {
	p := &Prefill{Tokens: n}
	keep := sw.o.PrefillContext && slices.Contains(sw.o.ContextLengths, n)
	for r := range sw.o.Repeats {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s := sw.m.NewState(sw.room(n))
		tokens := sw.tokens(n)
		start := time.Now()
		err := sw.m.Prepare(s, n, model.LastLogits)
		compiled := time.Since(start)
		if err == nil {
			err = sw.m.Forward(s, tokens, model.LastLogits, func(int, []float32) {})
		}
		elapsed := time.Since(start)
		if err != nil {
			s.Free(sw.m.Backend())
			return nil, err
		}
		p.Runs = append(p.Runs, elapsed.Seconds())
		p.CompileRuns = append(p.CompileRuns, compiled.Seconds())
		p.DeviceBytes = max(p.DeviceBytes, sw.sampleMemory())
		if keep && r == sw.o.Repeats-1 {
			sw.kept = s
		} else {
			s.Free(sw.m.Backend())
		}
	}
	p.Seconds = median(p.Runs)
	p.CompileSeconds = median(p.CompileRuns)
	p.TokensPerSecond = float64(n) / p.Seconds
	return p, nil
}

// decode times Repeats decode runs, each from its own state of n tokens.
func (sw *sweep) decode(ctx context.Context, n int, method string) (*Decode, error) {
	d := &Decode{Context: n, Tokens: sw.o.DecodeTokens, Method: method}
	start, err := sw.startState(n, method)
	if err != nil {
		return nil, err
	}
	// Every run starts from the same n tokens: the first uses the state
	// itself, later ones a copy of it.
	var snapshot *model.StateData
	if sw.o.Repeats > 1 {
		data, err := sw.m.Snapshot(start)
		if err != nil {
			start.Free(sw.m.Backend())
			return nil, err
		}
		snapshot = &data
	}
	for r := range sw.o.Repeats {
		s := start
		if r > 0 {
			if s, err = sw.m.Import(*snapshot, sw.room(n)); err != nil {
				return nil, err
			}
		}
		elapsed, err := decodeSteps(ctx, sw.m, s, sw.o.DecodeTokens, sw.o.Sampling)
		if err == nil && r == 0 {
			err = sw.countKernels(d, s)
		}
		sw.sampleMemory()
		s.Free(sw.m.Backend())
		if err != nil {
			return nil, err
		}
		d.Runs = append(d.Runs, elapsed.Seconds())
	}
	d.Seconds = median(d.Runs)
	d.TokensPerSecond = float64(d.Tokens) / d.Seconds
	return d, nil
}

// startState makes a state holding n tokens by the chosen method.
func (sw *sweep) startState(n int, method string) (*model.State, error) {
	if method == MethodImport {
		return sw.m.Import(randomState(&sw.m.Dims, sw.m.KV, n, sw.rng), sw.room(n))
	}
	if s := sw.kept; s != nil && s.Pos() == n {
		sw.kept = nil
		return s, nil
	}
	s := sw.m.NewState(sw.room(n))
	if err := sw.m.Forward(s, sw.tokens(n), model.NoLogits, nil); err != nil {
		s.Free(sw.m.Backend())
		return nil, err
	}
	return s, nil
}

// dropKept frees a prefilled state nobody used.
func (sw *sweep) dropKept() {
	if sw.kept != nil {
		sw.kept.Free(sw.m.Backend())
		sw.kept = nil
	}
}

// decodeSteps runs steps+1 decode steps of the shared loop (picking each
// token as sampling says, the first feeding the state's last token again) and returns the time from
// the first token's arrival to the last's: steps intervals, each between
// two tokens at the same point of the loop, whatever work the GPU had
// queued ahead of the host when the first arrived. (Timed to the loop's
// return instead, 8 steps read 14 % faster per token than 64 on the H200,
// docs/bench/cuda/2026-12-01-group1.)
func decodeSteps(ctx context.Context, m *model.Model, s *model.State, steps int, sampling sample.Params) (time.Duration, error) {
	var token int32
	if n := len(s.Tokens); n > 0 {
		token = s.Tokens[n-1]
	}
	var first, last time.Time
	done := 0
	err := decode.Run(ctx, m, s, decode.Options{Sampling: sampling, MaxFeeds: steps + 1}, token, func(decode.Token) bool {
		last = time.Now()
		if done == 0 {
			first = last
		}
		done++
		return done <= steps && ctx.Err() == nil
	})
	if err == nil {
		err = ctx.Err()
	}
	if err == nil && done != steps+1 {
		err = fmt.Errorf("bench: the decode loop gave %d tokens, want %d", done, steps+1)
	}
	if err != nil {
		return 0, err
	}
	return last.Sub(first), nil
}
