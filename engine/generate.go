package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"petal/engine/decode"
	"petal/engine/model"
	"petal/engine/sample"
	"petal/engine/tokenizer"
)

// Request is one generation over a sequence state.
type Request struct {
	Prompt         []int32 // the whole prompt; the state must already hold a prefix of it
	Sampling       sample.Params
	MaxTokens      int      // generated tokens at most; 0: until the context is full
	Stop           []string // strings that end generation (not included in the text)
	Logprobs       bool     // log-probabilities of the generated tokens
	TopLogprobs    int      // and of the n most likely alternatives at each step
	PromptLogprobs bool     // log-probabilities of the prompt tokens (completions echo)
	ScoreOnly      bool     // run the prompt and generate nothing (finish "length"): prompt scoring
	// OnText receives the generated text as it becomes final (stop strings
	// are held back until they can no longer match).
	OnText func(string)
}

// TokenLogprob is a token's log-probability under the model (before any
// sampling transformation) with the top alternatives.
type TokenLogprob struct {
	ID      int32
	Logprob float64
	Top     []Alternative
}

// Alternative is one of the most likely tokens at a step.
type Alternative struct {
	ID      int32
	Logprob float64
}

// Result of a generation.
type Result struct {
	Tokens         []int32 // generated tokens, without the stop token
	Text           string  // their text, cut before a stop string
	FinishReason   string  // "stop", "length" or "cancelled"
	StopToken      int32   // the end-of-sequence id that ended generation, or -1
	Logprobs       []TokenLogprob
	PromptLogprobs []TokenLogprob // one per prompt token after the first

	CachedTokens int           // prompt tokens the state already held
	PromptTokens int           // prompt tokens run through the model
	PromptTime   time.Duration // prefill
	FirstToken   time.Duration // from the start of the call to the first token
	DecodeTime   time.Duration // from the first token to the last
}

// Generate continues the state s with the rest of req.Prompt and samples
// until a stop id, a stop string, MaxTokens, the context limit or ctx ends.
// On return s holds the prompt and every generated token but the last,
// which was never run through the model.
func (e *Engine) Generate(ctx context.Context, s *model.State, req Request) (*Result, error) {
	start := time.Now()
	cached := s.Pos()
	if cached > len(req.Prompt) || !prefix(s.Tokens, req.Prompt) {
		return nil, fmt.Errorf("engine: the sequence state is not a prefix of the prompt")
	}
	fresh := req.Prompt[cached:]
	if len(fresh) == 0 {
		return nil, fmt.Errorf("engine: the prompt adds no token to the sequence")
	}
	if len(req.Prompt) >= e.MaxContext {
		return nil, fmt.Errorf("engine: the prompt has %d tokens; the context holds %d", len(req.Prompt), e.MaxContext)
	}
	if req.TopLogprobs < 0 || req.TopLogprobs > model.MaxTopLogprobs {
		return nil, fmt.Errorf("engine: %d top log-probabilities asked for; at most %d", req.TopLogprobs, model.MaxTopLogprobs)
	}
	res := &Result{CachedTokens: cached, PromptTokens: len(fresh), StopToken: -1}
	V := e.Model.Dims.Vocab

	// prefill: the last row of logits stays on the device for the sampling
	// op, unless the prompt is scored (every row read) or only scored
	mode := model.DeviceLogits
	if req.PromptLogprobs || req.ScoreOnly {
		mode = model.LastLogits
	}
	if req.PromptLogprobs {
		mode = model.AllLogits
	}
	var lp []float64
	if req.PromptLogprobs {
		lp = make([]float64, V)
	}
	last := cached + len(fresh) - 1
	badPos := -1 // the first row of non-finite logits
	var lastRow []float32
	err := e.Model.Forward(s, fresh, mode, func(pos int, row []float32) {
		if badPos < 0 && (pos == last || req.PromptLogprobs) && !sample.Finite(row) {
			badPos = pos
		}
		if req.PromptLogprobs && pos < last {
			sample.LogSoftmax(row, lp)
			res.PromptLogprobs = append(res.PromptLogprobs, tokenLogprob(lp, req.Prompt[pos+1], req.TopLogprobs))
		}
		if pos == last && req.PromptLogprobs {
			lastRow = append(lastRow[:0], row...)
		}
	})
	if err != nil {
		return nil, err
	}
	if badPos >= 0 {
		return nil, NonFiniteLogits(badPos)
	}
	res.PromptTime = time.Since(start)
	if req.ScoreOnly {
		res.FinishReason = "length"
		return res, nil
	}
	if lastRow != nil {
		if err := e.Model.WriteLogits(lastRow); err != nil {
			return nil, err
		}
	}

	text := newStopText(e.Tokenizer, req.Stop, req.OnText)
	var firstAt time.Time
	maxFeeds := e.MaxContext - 1 - s.Pos() // a token is fed only while the next position fits
	if req.MaxTokens > 0 {
		maxFeeds = min(maxFeeds, req.MaxTokens-1)
	}
	opt := decode.Options{Sampling: req.Sampling, Prompt: req.Prompt, Logprobs: req.Logprobs, Top: req.TopLogprobs,
		MaxFeeds: max(maxFeeds, 0), Stops: true, Ahead: e.ahead}
	err = decode.Run(ctx, e.Model, s, opt, -1, func(t decode.Token) bool {
		if firstAt.IsZero() {
			firstAt = time.Now()
			res.FirstToken = firstAt.Sub(start)
		}
		if e.StopIDs[t.ID] {
			res.FinishReason, res.StopToken = "stop", t.ID
			return false
		}
		if req.Logprobs {
			tl := TokenLogprob{ID: t.ID, Logprob: float64(t.Logprob)}
			for j, id := range t.Top {
				tl.Top = append(tl.Top, Alternative{id, float64(t.TopLogprobs[j])})
			}
			res.Logprobs = append(res.Logprobs, tl)
		}
		res.Tokens = append(res.Tokens, t.ID)
		if text.push(t.ID) {
			res.FinishReason = "stop"
			return false
		}
		if req.MaxTokens > 0 && len(res.Tokens) >= req.MaxTokens || s.Pos()+1 >= e.MaxContext {
			res.FinishReason = "length"
			return false
		}
		if ctx.Err() != nil {
			res.FinishReason = "cancelled"
			return false
		}
		return true
	})
	var nf *decode.NonFinite
	if errors.As(err, &nf) {
		return nil, NonFiniteLogits(nf.Pos)
	}
	if err != nil {
		return nil, err
	}
	res.Text = text.finish()
	if !firstAt.IsZero() {
		res.DecodeTime = time.Since(firstAt)
	}
	return res, nil
}

// NonFiniteLogits is the error of a row of logits holding NaN or an
// infinity at pos (0-based, in the sequence): it comes from damaged
// weights or a numerical fault, never from a real answer, so it is refused
// rather than sampled or scored.
func NonFiniteLogits(pos int) error {
	return fmt.Errorf("engine: the model produced non-finite logits at position %d (NaN or infinity: damaged weights or a numerical fault)", pos)
}

func tokenLogprob(lp []float64, id int32, top int) TokenLogprob {
	t := TokenLogprob{ID: id, Logprob: lp[id]}
	if top > 0 {
		for _, a := range sample.TopN(lp, top) {
			t.Top = append(t.Top, Alternative{a, lp[a]})
		}
	}
	return t
}

func prefix(a, b []int32) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// stopText decodes generated tokens incrementally, finds stop strings and
// streams the text that no stop string can still claim.
type stopText struct {
	dec     *tokenizer.Stream
	stops   []string
	hold    int // bytes kept back: the longest stop string minus one
	text    strings.Builder
	emitted int
	onText  func(string)
	stopped bool
}

func newStopText(t *tokenizer.Tokenizer, stops []string, onText func(string)) *stopText {
	st := &stopText{dec: tokenizer.NewStream(t, false), onText: onText}
	for _, s := range stops {
		if s != "" {
			st.stops = append(st.stops, s)
			st.hold = max(st.hold, len(s)-1)
		}
	}
	return st
}

// push adds a token; it reports whether a stop string has appeared.
func (st *stopText) push(tok int32) bool {
	piece := st.dec.Push(int(tok))
	if piece == "" {
		return false
	}
	from := max(0, st.text.Len()-st.hold)
	st.text.WriteString(piece)
	all := st.text.String()
	for _, s := range st.stops {
		if i := strings.Index(all[from:], s); i >= 0 {
			st.cut(from + i)
			return true
		}
	}
	st.emit(len(all) - st.hold)
	return false
}

func (st *stopText) cut(at int) {
	all := st.text.String()[:at]
	st.text.Reset()
	st.text.WriteString(all)
	st.stopped = true
	st.emit(at)
}

// emit streams text up to byte n (never splitting a character).
func (st *stopText) emit(n int) {
	all := st.text.String()
	for n > st.emitted && n < len(all) && !utf8Start(all[n]) {
		n--
	}
	if n > st.emitted && st.onText != nil {
		st.onText(all[st.emitted:n])
	}
	st.emitted = max(st.emitted, n)
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// finish flushes the decoder and the held-back text and returns it all.
func (st *stopText) finish() string {
	if !st.stopped {
		st.text.WriteString(st.dec.Flush())
	}
	st.emit(st.text.Len())
	return st.text.String()
}
