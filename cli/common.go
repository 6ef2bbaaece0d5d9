package cli

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"petal/engine"
	"petal/engine/backend"
	"petal/engine/cpu"
)

// modelOptions are the flags every model-loading command shares.
type modelOptions struct {
	Model        string
	Backend      string
	Chunk        int
	MaxContext   int
	ChatTemplate string
}

func modelFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "model folder or Hugging Face repo id in the local cache (default: $PETAL_MODEL, else the embedded tiny model)"},
		&cli.StringFlag{Name: "backend", Value: "cpu", Usage: "where to run: cpu (metal and cuda are not available yet)"},
		&cli.IntFlag{Name: "chunk", Value: 512, Usage: "prefill chunk size in tokens: bounds temporary memory for long prompts"},
		&cli.IntFlag{Name: "max-context", Usage: "most tokens per sequence (default: the model's max_position_embeddings)"},
		&cli.StringFlag{Name: "chat-template", Usage: "a Jinja chat template file to use instead of the model's own"},
	}
}

func readModelOptions(c *cli.Context) modelOptions {
	return modelOptions{
		Model: c.String("model"), Backend: c.String("backend"), Chunk: c.Int("chunk"),
		MaxContext: c.Int("max-context"), ChatTemplate: c.String("chat-template"),
	}
}

func newBackend(name string) (backend.Backend, error) {
	switch strings.ToLower(name) {
	case "", "cpu":
		return cpu.New(), nil
	case "cuda", "metal":
		return nil, usageErr("--backend %s: this backend is not built yet; use --backend cpu", name)
	}
	return nil, usageErr("--backend %s: unknown backend (cpu)", name)
}

// openEngine resolves the model and opens it on the chosen backend.
func openEngine(st *Streams, o modelOptions) (*engine.Engine, string, error) {
	be, err := newBackend(o.Backend)
	if err != nil {
		return nil, "", err
	}
	if o.Chunk < 1 {
		return nil, "", usageErr("--chunk %d: want at least 1", o.Chunk)
	}
	if o.MaxContext < 0 {
		return nil, "", usageErr("--max-context %d: want a positive number", o.MaxContext)
	}
	dir, name, err := resolveModel(o.Model, st.Getenv)
	if err != nil {
		return nil, "", usageErr("%v", err)
	}
	e, err := engine.Open(dir, engine.Options{Backend: be, Chunk: o.Chunk, MaxContext: o.MaxContext, ChatTemplate: o.ChatTemplate})
	if err != nil {
		return nil, "", fmt.Errorf("loading %s: %w", name, err)
	}
	return e, name, nil
}
