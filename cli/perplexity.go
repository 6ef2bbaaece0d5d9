package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/tidwall/gjson"
	"github.com/urfave/cli/v2"

	"petal/engine"
	"petal/engine/model"
	"petal/engine/sample"
)

type perplexityOptions struct {
	modelOptions
	File   string
	JSON   bool
	Stride int // 0: half the window
}

func perplexityCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:      "perplexity",
		Usage:     "score texts teacher-forced: perplexity per line and overall",
		ArgsUsage: "FILE|-",
		Description: `Each input line is {"tokens": [ids...]} or {"text": "..."} (tokenised without special tokens
added). The model sees tokens 0..i and is scored on token i+1.

A text longer than the context (--max-context, else the model's max_position_embeddings) is
scored with a sliding window, as the Hugging Face perplexity guide does: windows of max-context
tokens starting at 0, stride, 2*stride, ...; each window scores only the tokens no earlier window
scored, so every token is scored once, with the tokens before it in its window as context (at
least max-context - stride of them once the first window is past). --stride defaults to half the
window; a smaller stride gives more context per token and costs more (each window prefills from
scratch). With --stride equal to the window, the windows are independent chunks and the first
token of each chunk is not scored (it has no context). A text within the context is one window,
whatever the stride.

With --json, one line per input line (this format is stable):
  {"n": N, "nll": mean negative log-likelihood (nats) of the scored tokens, "ppl": exp(nll),
   "scored": tokens scored (N-1 unless --stride equals the window), "windows": windows run,
   "target_logprobs": [N-1 log-probabilities of tokens 1..N-1, null where not scored],
   "argmax": [N-1 top-1 predictions after tokens 0..i, null where not scored]}
A line that cannot be scored gives {"line": L, "error": "..."} and the exit code is 1.`,
		Flags: append(modelFlags(),
			&cli.BoolFlag{Name: "json", Usage: "one JSON result per input line"},
			&cli.IntFlag{Name: "stride", Usage: "tokens a sliding window advances for a text longer than the context, 1 to the window (default: half the window)"},
		),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErr("perplexity needs one FILE (or - for standard input)")
			}
			o := perplexityOptions{modelOptions: readModelOptions(c), File: c.Args().First(), JSON: c.Bool("json"), Stride: c.Int("stride")}
			if c.IsSet("stride") && o.Stride < 1 {
				return usageErr("--stride %d: want at least 1", o.Stride)
			}
			return runPerplexity(c, st, o)
		},
	}
}

type perplexityResult struct {
	N              int        `json:"n"`
	NLL            float64    `json:"nll"`
	PPL            float64    `json:"ppl"`
	Scored         int        `json:"scored"`
	Windows        int        `json:"windows"`
	TargetLogprobs []*float64 `json:"target_logprobs"`
	Argmax         []*int32   `json:"argmax"`
}

func runPerplexity(c *cli.Context, st *Streams, o perplexityOptions) error {
	in := st.In
	if o.File != "-" {
		f, err := os.Open(o.File)
		if err != nil {
			return usageErr("%v", err)
		}
		defer f.Close()
		in = f
	}
	e, _, err := openEngine(st, o.modelOptions)
	if err != nil {
		return err
	}
	defer e.Close()
	stride := o.Stride
	if stride == 0 {
		stride = max(1, e.MaxContext/2)
	}
	if stride > e.MaxContext {
		return usageErr("--stride %d: want at most the window of %d tokens (--max-context)", stride, e.MaxContext)
	}
	out := bufio.NewWriter(st.Out)
	defer out.Flush()

	r := bufio.NewReader(in)
	var totalNLL float64
	var totalTokens, failed int
	for lineNo := 1; ; lineNo++ {
		if c.Context.Err() != nil {
			return &exitError{ExitInterrupted, fmt.Errorf("interrupted")}
		}
		line, readErr := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			res, err := scoreLine(e, line, stride)
			switch {
			case err != nil:
				failed++
				if o.JSON {
					writeJSONLine(out, map[string]any{"line": lineNo, "error": err.Error()})
				} else {
					fmt.Fprintf(out, "line %d: error: %v\n", lineNo, err)
				}
			case o.JSON:
				writeJSONLine(out, res)
			default:
				fmt.Fprintf(out, "line %d: %d tokens, nll %.4f, perplexity %.3f", lineNo, res.N, res.NLL, res.PPL)
				if res.Windows > 1 {
					fmt.Fprintf(out, " (%d windows, %d tokens scored)", res.Windows, res.Scored)
				}
				fmt.Fprintln(out)
			}
			if err == nil {
				totalNLL += res.NLL * float64(res.Scored)
				totalTokens += res.Scored
			}
			out.Flush()
		}
		if readErr == io.EOF {
			break
		}
		if readErr != nil {
			return readErr
		}
	}
	if !o.JSON && totalTokens > 0 {
		nll := totalNLL / float64(totalTokens)
		fmt.Fprintf(out, "overall: %d scored tokens, nll %.4f, perplexity %.3f\n", totalTokens, nll, math.Exp(nll))
	}
	if failed > 0 {
		out.Flush()
		return &exitError{ExitJobsFailed, fmt.Errorf("%d line(s) could not be scored", failed)}
	}
	return nil
}

// writeJSONLine writes v as one JSON line, with <, > and & as they are:
// token text such as <|im_start|> must read as itself, not \u003c.
func writeJSONLine(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// scoreLine parses {"tokens": [...]} or {"text": "..."} and scores it.
func scoreLine(e *engine.Engine, line []byte, stride int) (*perplexityResult, error) {
	if !gjson.ValidBytes(line) {
		return nil, fmt.Errorf("not valid JSON")
	}
	v := gjson.ParseBytes(line)
	var ids []int32
	switch tok, text := v.Get("tokens"), v.Get("text"); {
	case tok.Exists() && text.Exists():
		return nil, fmt.Errorf("give either \"tokens\" or \"text\", not both")
	case tok.Exists():
		if !tok.IsArray() {
			return nil, fmt.Errorf("field \"tokens\" must be an array of token ids")
		}
		for i, t := range tok.Array() {
			if t.Type != gjson.Number || t.Num != math.Trunc(t.Num) || t.Num < 0 || t.Num >= float64(e.Model.Dims.Vocab) {
				return nil, fmt.Errorf("field \"tokens\"[%d] = %s is not a token id below %d", i, t.Raw, e.Model.Dims.Vocab)
			}
			ids = append(ids, int32(t.Num))
		}
	case text.Exists():
		if text.Type != gjson.String {
			return nil, fmt.Errorf("field \"text\" must be a string")
		}
		ids = e.Encode(text.Str)
	default:
		return nil, fmt.Errorf("a line needs \"tokens\" or \"text\"")
	}
	if len(ids) < 2 {
		return nil, fmt.Errorf("%d token(s): at least 2 are needed to score one", len(ids))
	}
	return scoreIDs(e, ids, stride)
}

// scoreIDs scores ids teacher-forced in sliding windows of e.MaxContext
// tokens that start stride tokens apart (1 <= stride <= the window). Each
// window scores the tokens from where the previous one ended, so each
// token is scored once; with stride = window a window's first token has no
// context and is not scored (the Hugging Face perplexity guide's method).
func scoreIDs(e *engine.Engine, ids []int32, stride int) (*perplexityResult, error) {
	window := e.MaxContext
	if stride < 1 || stride > window {
		return nil, fmt.Errorf("stride %d: want 1 to the window of %d tokens", stride, window)
	}
	n := len(ids)
	res := &perplexityResult{N: n, TargetLogprobs: make([]*float64, n-1), Argmax: make([]*int32, n-1)}
	lp := make([]float64, e.Model.Dims.Vocab)
	scoredUpTo := 1 // the first token is never a target
	for begin := 0; ; begin += stride {
		end := min(begin+window, n)
		s := e.NewState()
		badPos := -1 // the first position whose logits are not finite
		err := e.Model.Forward(s, ids[begin:end], model.AllLogits, func(pos int, logits []float32) {
			target := begin + pos + 1
			if target < scoredUpTo || target >= end || badPos >= 0 {
				return
			}
			if !sample.Finite(logits) {
				badPos = begin + pos
				return
			}
			sample.LogSoftmax(logits, lp)
			logprob, top := lp[ids[target]], sample.Argmax(logits)
			res.TargetLogprobs[target-1], res.Argmax[target-1] = &logprob, &top
			res.NLL -= logprob
			res.Scored++
		})
		s.Free(e.Model.Backend())
		if err != nil {
			return nil, err
		}
		if badPos >= 0 {
			return nil, engine.NonFiniteLogits(badPos)
		}
		res.Windows++
		if end == n {
			break
		}
		scoredUpTo = end
	}
	res.NLL /= float64(res.Scored)
	res.PPL = math.Exp(res.NLL)
	return res, nil
}
