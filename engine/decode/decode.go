// Package decode is the one decode loop of petal, shared by generation and
// by `petal bench`: each step is one compiled program (forward one token,
// sample the next on the device, advance), and the host reads back only
// the chosen id and a non-finite flag, 8 bytes, plus the log-probabilities
// when a request asks for them. It never reads logits.
//
// On a backend whose Run returns early (backend.Asynchronous) the loop
// issues step n+1 before it reads id n, so the device never waits for the
// host. When the host then finds that id n ends the generation, the step
// issued ahead has fed it to the state: the loop undoes that (a device
// copy of the state's recurrent part taken before the step, and the
// position set back), so the state is always exactly what the plain loop
// leaves.
package decode

import (
	"context"
	"fmt"

	"petal/engine/backend"
	"petal/engine/model"
	"petal/engine/sample"
)

// Options of one run of the loop.
type Options struct {
	Sampling sample.Params
	Prompt   []int32 // tokens that count as seen for the repetition penalty
	Logprobs bool    // the chosen token's log-probability
	Top      int     // and of this many alternatives (at most model.MaxTopLogprobs)
	// MaxFeeds is the most tokens the loop may run through the model
	// (from, when set, included): no step is issued ahead beyond it, and
	// Each must stop by then. < 0: no limit but the state's.
	MaxFeeds int
	// Stops says whether Each may end the loop on a token it cannot know
	// in advance (a stop id, a stop string, a cancellation): steps issued
	// ahead then keep a backup to undo. Without it a step issued ahead is
	// kept when Each ends the loop (the state then holds the last token).
	Stops bool
	// Ahead issues each step before reading the last id; nil: where the
	// backend is asynchronous.
	Ahead *bool
}

// Token is one chosen token; Top and TopLogprobs are valid only during
// the call of Each.
type Token struct {
	ID          int32
	Logprob     float32
	Top         []int32
	TopLogprobs []float32
}

// NonFinite is the error of a row of logits holding NaN or an infinity.
type NonFinite struct{ Pos int }

func (e *NonFinite) Error() string {
	return fmt.Sprintf("decode: the model produced non-finite logits at position %d", e.Pos)
}

// Run samples tokens and hands each to each, which returns whether to go
// on; a token each accepts is run through the model (appended to
// s.Tokens) before the next is chosen. The first token is sampled from the
// logits a Forward with DeviceLogits (or WriteLogits) left, or, when from
// >= 0, from is run through the model first (it is the last token of s in
// spirit: bench starts from a state this way). On return s holds every
// token each accepted, none it refused.
func Run(ctx context.Context, m *model.Model, s *model.State, o Options, from int32, each func(Token) bool) error {
	l, err := newLoop(m, s, o)
	if err != nil {
		return err
	}
	defer l.close()
	return l.run(from, each)
}

type loop struct {
	m      *model.Model
	s      *model.State
	be     backend.Backend
	sp     *model.Sampler
	o      Options
	ahead  bool
	backup *model.Backup

	status [2]int32
	lpOut  []float32
	lpIDs  []int32
	fed    int // tokens run through the model by this loop
}

func newLoop(m *model.Model, s *model.State, o Options) (*loop, error) {
	if o.Top < 0 || o.Top > model.MaxTopLogprobs {
		return nil, fmt.Errorf("decode: %d top log-probabilities; at most %d", o.Top, model.MaxTopLogprobs)
	}
	be := m.Backend()
	l := &loop{m: m, s: s, be: be, o: o}
	if o.Ahead != nil {
		l.ahead = *o.Ahead
	} else if a, ok := be.(backend.Asynchronous); ok {
		l.ahead = a.Asynchronous()
	}
	var err error
	if l.sp, err = m.Sampler(); err != nil {
		return nil, err
	}
	if o.Logprobs {
		l.lpOut, l.lpIDs = make([]float32, 1+model.MaxTopLogprobs), make([]int32, model.MaxTopLogprobs)
	}
	if l.ahead && o.Stops {
		if l.backup, err = m.NewBackup(s); err != nil {
			return nil, err
		}
	}
	return l, l.setUp()
}

func (l *loop) close() {
	if l.backup != nil {
		l.backup.Free(l.be)
	}
}

// setUp writes the request's settings, and the counts the penalties read.
func (l *loop) setUp() error {
	st := l.o.Sampling.Settings()
	par := make([]float32, backend.SampleParamCount)
	par[backend.SampleTemperature], par[backend.SampleTopP], par[backend.SampleMinP] = st.Temperature, st.TopP, st.MinP
	par[backend.SamplePresence], par[backend.SampleFrequency], par[backend.SampleRepetition] = st.Presence, st.Frequency, st.Repetition
	cfg := make([]int32, backend.SampleConfigCount)
	cfg[backend.SampleTopK] = st.TopK
	cfg[backend.SampleSeedLow], cfg[backend.SampleSeedHigh] = int32(uint32(st.Seed)), int32(uint32(st.Seed>>32))
	if err := l.be.Write(l.sp.Params, par); err != nil {
		return err
	}
	if err := l.be.WriteInts(l.sp.Config, cfg); err != nil {
		return err
	}
	if !st.Penalised() {
		return nil // the op reads no counts
	}
	V := l.m.Dims.Vocab
	flags := make([]int32, V)
	if err := l.be.WriteInts(l.sp.Counts, flags); err != nil {
		return err
	}
	for _, t := range l.o.Prompt {
		if t >= 0 && int(t) < V {
			flags[t] = 1
		}
	}
	return l.be.WriteInts(l.sp.InPrompt, flags)
}

func (l *loop) run(from int32, each func(Token) bool) error {
	q := 0 // the parity of the status that holds the next id to read
	if from >= 0 {
		if err := l.m.SetToken(from); err != nil {
			return err
		}
		if err := l.step(0); err != nil {
			return err
		}
		l.s.Tokens = append(l.s.Tokens, from)
	} else {
		p, err := l.m.SampleProgram(0, l.o.Logprobs)
		if err != nil {
			return err
		}
		if err := l.m.RunProgram(p); err != nil {
			return err
		}
	}
	for {
		issued := false
		if l.ahead && l.mayFeed() {
			// step n+1 before id n is read: it feeds the token the device chose
			if l.backup != nil {
				if err := l.backup.Save(l.be); err != nil {
					return err
				}
			}
			if err := l.step(1 - q); err != nil {
				return err
			}
			issued = true
		}
		tok, bad, err := l.read(q)
		if err != nil {
			return err
		}
		if bad {
			return &NonFinite{Pos: l.s.Pos() - 1}
		}
		if !each(tok) {
			if issued && l.backup != nil {
				return l.backup.Restore(l.m, l.s)
			}
			if issued {
				l.s.Tokens = append(l.s.Tokens, tok.ID)
			}
			return nil
		}
		if !issued {
			if !l.mayFeed() {
				return fmt.Errorf("decode: the loop went on past its %d tokens", l.o.MaxFeeds)
			}
			if err := l.step(1 - q); err != nil {
				return err
			}
		}
		l.s.Tokens = append(l.s.Tokens, tok.ID)
		q = 1 - q
	}
}

func (l *loop) mayFeed() bool { return l.o.MaxFeeds < 0 || l.fed < l.o.MaxFeeds }

// step issues the decode step that writes the status of parity q.
func (l *loop) step(q int) error {
	if err := l.m.Reserve(l.s, l.s.Pos()+1); err != nil {
		return err
	}
	p, err := l.m.DecodeProgram(l.s, q, l.o.Logprobs)
	if err != nil {
		return err
	}
	l.fed++
	return l.m.RunProgram(p)
}

// read fetches the id of parity q (and its log-probabilities).
func (l *loop) read(q int) (Token, bool, error) {
	if err := l.be.ReadInts(l.sp.Status[q], l.status[:]); err != nil {
		return Token{}, false, err
	}
	t := Token{ID: l.status[0]}
	if l.o.Logprobs {
		if err := l.be.Read(l.sp.LogprobOut[q], l.lpOut); err != nil {
			return Token{}, false, err
		}
		if err := l.be.ReadInts(l.sp.LogprobIDs[q], l.lpIDs); err != nil {
			return Token{}, false, err
		}
		t.Logprob, t.Top, t.TopLogprobs = l.lpOut[0], l.lpIDs[:l.o.Top], l.lpOut[1:1+l.o.Top]
	}
	return t, l.status[1] != 0, nil
}
