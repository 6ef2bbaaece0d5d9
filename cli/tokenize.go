package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/tidwall/gjson"
	"github.com/urfave/cli/v2"

	"petal/engine/chat"
	"petal/engine/tokenizer"
)

func tokenizerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "model folder (only its tokenizer files are read) or Hugging Face repo id (default: $PETAL_MODEL, else the embedded tiny model)"},
	}
}

func loadTokenizer(st *Streams, model string) (*tokenizer.Tokenizer, string, error) {
	dir, _, err := resolveModel(model, st.Getenv)
	if err != nil {
		return nil, "", usageErr("%v", err)
	}
	t, err := tokenizer.Load(dir)
	return t, dir, err
}

// inputFile opens the command's one FILE argument; none or "-" is
// standard input. The caller closes what it returns.
func inputFile(c *cli.Context, st *Streams) (io.ReadCloser, error) {
	if c.NArg() > 1 {
		return nil, usageErr("%s takes one FILE (or - for standard input), got %d arguments", c.Command.Name, c.NArg())
	}
	name := c.Args().First()
	if name == "" || name == "-" {
		return io.NopCloser(st.In), nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, usageErr("%s is a folder, not a file", name)
	}
	return f, nil
}

func tokenizeCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:      "tokenize",
		Usage:     "text to token ids: reads {\"text\": ...} lines, writes {\"ids\": [...], \"tokens\": [...]}",
		ArgsUsage: "[FILE|-]",
		Description: `Reads JSON lines {"text": "..."} from FILE, or standard input without one or with - (or the
whole input as one raw text with --raw), and writes one line per input: {"ids": [...],
"tokens": ["..."]} where tokens are the vocabulary strings (byte-level: a space shows as "Ġ").
No special tokens are added; special-token text in the input (e.g. <|im_start|>) becomes its
id. Needs only tokenizer.json of the model.`,
		Flags: append(tokenizerFlags(), &cli.BoolFlag{Name: "raw", Usage: "read the input as one plain text, not JSON lines"}),
		Action: func(c *cli.Context) error {
			in, err := inputFile(c, st)
			if err != nil {
				return err
			}
			defer in.Close()
			t, _, err := loadTokenizer(st, c.String("model"))
			if err != nil {
				return err
			}
			encode := func(text string) map[string]any {
				ids := t.Encode(text)
				tokens := make([]string, len(ids))
				for i, id := range ids {
					tokens[i] = t.Token(id)
				}
				return map[string]any{"ids": ids, "tokens": tokens}
			}
			out := bufio.NewWriter(st.Out)
			defer out.Flush()
			if c.Bool("raw") {
				data, err := io.ReadAll(in)
				if err != nil {
					return err
				}
				writeJSONLine(out, encode(string(data)))
				return nil
			}
			return eachJSONLine(in, out, func(v gjson.Result) (any, error) {
				text := v.Get("text")
				if text.Type != gjson.String {
					return nil, fmt.Errorf("want {\"text\": \"...\"}")
				}
				return encode(text.Str), nil
			})
		},
	}
}

func detokenizeCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:      "detokenize",
		Usage:     "token ids to text: reads {\"ids\": [...]} lines, writes {\"text\": ...}",
		ArgsUsage: "[FILE|-]",
		Description: `Reads JSON lines {"ids": [...]} from FILE, or standard input without one or with -, and writes
{"text": "..."}. Special tokens are kept as their text unless --skip-special. Bytes that do not
form valid UTF-8 become U+FFFD.`,
		Flags: append(tokenizerFlags(), &cli.BoolFlag{Name: "skip-special", Usage: "leave special tokens out of the text"}),
		Action: func(c *cli.Context) error {
			in, err := inputFile(c, st)
			if err != nil {
				return err
			}
			defer in.Close()
			t, _, err := loadTokenizer(st, c.String("model"))
			if err != nil {
				return err
			}
			out := bufio.NewWriter(st.Out)
			defer out.Flush()
			return eachJSONLine(in, out, func(v gjson.Result) (any, error) {
				arr := v.Get("ids")
				if !arr.IsArray() {
					return nil, fmt.Errorf("want {\"ids\": [...]}")
				}
				var ids []int
				for i, x := range arr.Array() {
					if x.Type != gjson.Number || x.Num != math.Trunc(x.Num) || x.Num < 0 || x.Num >= float64(t.VocabSize()) {
						return nil, fmt.Errorf("ids[%d] = %s is not a token id below %d", i, x.Raw, t.VocabSize())
					}
					ids = append(ids, int(x.Num))
				}
				return map[string]any{"text": t.Decode(ids, c.Bool("skip-special"))}, nil
			})
		},
	}
}

func chatTemplateCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:  "chat-template",
		Usage: "render a conversation with the model's chat template",
		Description: `Reads one JSON object from standard input:
  {"messages": [...], "tools": [...], "add_generation_prompt": true, "enable_thinking": false, ...}
and prints the rendered prompt exactly as the model will see it. Every key other than messages
and tools is passed to the template as a variable (as chat_template_kwargs are). With --ids, prints
{"text": ..., "ids": [...]} instead.`,
		Flags: append(tokenizerFlags(),
			&cli.StringFlag{Name: "chat-template", Usage: "a Jinja template file to use instead of the model's"},
			&cli.BoolFlag{Name: "ids", Usage: "also tokenise the rendered prompt and print JSON"}),
		Action: func(c *cli.Context) error {
			dir, _, err := resolveModel(c.String("model"), st.Getenv)
			if err != nil {
				return usageErr("%v", err)
			}
			var tmpl *chat.Template
			if f := c.String("chat-template"); f != "" {
				tmpl, err = chat.LoadTemplateFile(f)
				if err == nil {
					var sp map[string]string
					if sp, err = chat.ReadSpecialTokens(dir); err == nil {
						tmpl = tmpl.WithSpecialTokens(sp)
					}
				}
			} else {
				tmpl, err = chat.LoadTemplate(dir)
			}
			if err != nil {
				return err
			}
			req, err := io.ReadAll(st.In)
			if err != nil {
				return err
			}
			if !gjson.ValidBytes(req) {
				return usageErr("standard input is not one JSON object")
			}
			text, err := tmpl.Render(bytes.TrimSpace(req))
			if err != nil {
				return err
			}
			if !c.Bool("ids") {
				fmt.Fprint(st.Out, text)
				return nil
			}
			t, err := tokenizer.Load(dir)
			if err != nil {
				return err
			}
			writeJSONLine(st.Out, map[string]any{"text": text, "ids": t.Encode(text)})
			return nil
		},
	}
}

// eachJSONLine applies fn to every non-blank input line and writes its
// result, or {"line": N, "error": ...} for a bad line; the exit code is 1
// when any line failed.
func eachJSONLine(in io.Reader, out *bufio.Writer, fn func(gjson.Result) (any, error)) error {
	r := bufio.NewReader(in)
	failed := 0
	for lineNo := 1; ; lineNo++ {
		line, readErr := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var res any
			var err error
			if !gjson.ValidBytes(line) {
				err = fmt.Errorf("not valid JSON")
			} else {
				res, err = fn(gjson.ParseBytes(line))
			}
			if err != nil {
				failed++
				res = map[string]any{"line": lineNo, "error": err.Error()}
			}
			writeJSONLine(out, res)
			out.Flush()
		}
		if readErr == io.EOF {
			break
		}
		if readErr != nil {
			return readErr
		}
	}
	if failed > 0 {
		return &exitError{ExitJobsFailed, fmt.Errorf("%d line(s) failed", failed)}
	}
	return nil
}
