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
	File string
	JSON bool
}

func perplexityCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:      "perplexity",
		Usage:     "score texts teacher-forced: perplexity per line and overall",
		ArgsUsage: "FILE|-",
		Description: `Each input line is {"tokens": [ids...]} or {"text": "..."} (tokenised without special tokens
added). The model sees tokens 0..i and is scored on token i+1.

With --json, one line per input line (this format is stable):
  {"n": N, "nll": mean negative log-likelihood (nats), "ppl": exp(nll),
   "target_logprobs": [N-1 log-probabilities of tokens 1..N-1],
   "argmax": [N-1 top-1 predictions after tokens 0..i]}
A line that cannot be scored gives {"line": L, "error": "..."} and the exit code is 1.`,
		Flags: append(modelFlags(), &cli.BoolFlag{Name: "json", Usage: "one JSON result per input line"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageErr("perplexity needs one FILE (or - for standard input)")
			}
			return runPerplexity(c, st, perplexityOptions{modelOptions: readModelOptions(c), File: c.Args().First(), JSON: c.Bool("json")})
		},
	}
}

type perplexityResult struct {
	N              int       `json:"n"`
	NLL            float64   `json:"nll"`
	PPL            float64   `json:"ppl"`
	TargetLogprobs []float64 `json:"target_logprobs"`
	Argmax         []int32   `json:"argmax"`
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
			res, err := scoreLine(e, line)
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
				fmt.Fprintf(out, "line %d: %d tokens, nll %.4f, perplexity %.3f\n", lineNo, res.N, res.NLL, res.PPL)
			}
			if err == nil {
				totalNLL += res.NLL * float64(res.N-1)
				totalTokens += res.N - 1
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
func scoreLine(e *engine.Engine, line []byte) (*perplexityResult, error) {
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
	if len(ids) > e.MaxContext {
		return nil, fmt.Errorf("%d tokens exceed the context of %d", len(ids), e.MaxContext)
	}
	res := &perplexityResult{N: len(ids)}
	lp := make([]float64, e.Model.Dims.Vocab)
	s := e.NewState()
	defer s.Free(e.Model.Backend())
	err := e.Model.Forward(s, ids, model.AllLogits, func(pos int, logits []float32) {
		if pos+1 >= len(ids) {
			return
		}
		sample.LogSoftmax(logits, lp)
		res.TargetLogprobs = append(res.TargetLogprobs, lp[ids[pos+1]])
		res.Argmax = append(res.Argmax, sample.Argmax(logits))
		res.NLL -= lp[ids[pos+1]]
	})
	if err != nil {
		return nil, err
	}
	res.NLL /= float64(len(ids) - 1)
	res.PPL = math.Exp(res.NLL)
	return res, nil
}
