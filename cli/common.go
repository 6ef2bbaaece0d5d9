package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"petal/engine"
	"petal/engine/backend"
	"petal/engine/cpu"
	"petal/engine/cuda"
	"petal/engine/cuda/driver"
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
		&cli.StringFlag{Name: "backend", Value: "auto", Usage: backendUsage},
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

const backendUsage = "where to run, NAME[:KEY=VALUE,...]: auto (the default: cuda where a usable NVIDIA GPU is present, else cpu); cpu, with options " + cpu.OptionsHelp +
	" (e.g. cpu:delta=chunked); cuda (an NVIDIA GPU of compute capability 9.0 or newer, through the driver alone), with options " +
	cuda.OptionsHelp + " (e.g. cuda:kv=bf16); metal is not available yet"

func newBackend(spec string, warn func(string)) (backend.Backend, error) {
	if strings.TrimSpace(spec) == "" {
		spec = "auto"
	}
	sp, err := backend.ParseSpec(spec)
	if err != nil {
		return nil, usageErr("--backend: %v", err)
	}
	switch sp.Name {
	case "auto":
		if len(sp.Options) > 0 {
			return nil, usageErr("--backend %s: auto takes no options; name the backend to give it options (cpu:..., cuda:...)", spec)
		}
		return autoBackend(warn)
	case "cpu":
		o, err := cpu.ParseOptions(sp.Options)
		if err != nil {
			return nil, usageErr("--backend %s: %v", spec, err)
		}
		b, err := cpu.NewWithOptions(o)
		if err != nil {
			return nil, usageErr("--backend %s: %v", spec, err)
		}
		return b, nil
	case "cuda":
		o, err := cuda.ParseOptions(sp.Options)
		if err != nil {
			return nil, usageErr("--backend %s: %v", spec, err)
		}
		b, err := cuda.New(o)
		if err != nil {
			return nil, usageErr("--backend %s: %v", spec, err)
		}
		return b, nil
	case "metal":
		return nil, usageErr("--backend %s: this backend is not built yet; use --backend cpu or cuda", spec)
	}
	return nil, usageErr("--backend %s: unknown backend (auto, cpu, cuda)", spec)
}

// autoBackend is CUDA where a usable NVIDIA GPU is present, else the CPU.
// A machine without CUDA at all (no driver, no GPU, not Linux) gets the
// CPU quietly; a GPU that is there but cannot be used (too old, a driver
// fault) gets the CPU with a warning that says why. Metal joins here once
// it is built.
func autoBackend(warn func(string)) (backend.Backend, error) {
	b, err := newCUDA(cuda.DefaultOptions())
	if err == nil {
		return b, nil
	}
	if !driver.Unavailable(err) && warn != nil {
		warn(fmt.Sprintf("--backend auto: the NVIDIA GPU cannot be used (%v); running on the CPU", err))
	}
	return cpu.New(), nil
}

// newCUDA opens the CUDA backend; a variable so tests can stand in for a
// machine with or without a usable GPU.
var newCUDA = func(o cuda.Options) (backend.Backend, error) { return cuda.New(o) }

// openEngine resolves the model and opens it on the chosen backend.
func openEngine(st *Streams, o modelOptions) (*engine.Engine, string, error) {
	be, err := newBackend(o.Backend, func(msg string) { fmt.Fprintln(st.Err, "petal:", msg) })
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

// openInput opens a file the command reads, refusing what cannot be read
// as one (a folder) with a usage error naming it.
func openInput(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	if info, err := f.Stat(); err != nil {
		f.Close()
		return nil, usageErr("%v", err)
	} else if info.IsDir() {
		f.Close()
		return nil, usageErr("%s is a folder, not a file of lines", path)
	}
	return f, nil
}

// refuseSameFile is a usage error when the output path names the file the
// input reads (itself, a symlink to it or a hard link of it), which opening
// the output for writing would destroy. A missing output is fine.
func refuseSameFile(in io.Reader, inName, outPath string) error {
	f, ok := in.(interface{ Stat() (os.FileInfo, error) })
	if !ok {
		return nil
	}
	inInfo, err := f.Stat()
	if err != nil || !inInfo.Mode().IsRegular() {
		return nil
	}
	outInfo, err := os.Stat(outPath)
	if err != nil {
		return nil // not there yet, or the open reports why
	}
	if os.SameFile(inInfo, outInfo) {
		return usageErr("the output %s is the input %s (the same file): writing results there would destroy the jobs; choose another --output", outPath, inName)
	}
	return nil
}
