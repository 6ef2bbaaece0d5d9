package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"

	"petal/bench"
	"petal/engine"
	"petal/engine/backend"
	"petal/engine/checkpoint"
	"petal/engine/cpu"
	"petal/engine/cuda"
	"petal/engine/cuda/driver"
	"petal/engine/metal"
	"petal/engine/metal/device"
	"petal/engine/model"
)

// modelOptions are the flags every model-loading command shares.
type modelOptions struct {
	Model        string
	Backend      string
	Device       gpuFlag
	Chunk        int
	MaxContext   int
	ChatTemplate string
}

func modelFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "model folder or Hugging Face repo id in the local cache (default: $PETAL_MODEL, else the embedded tiny model)"},
		&cli.StringFlag{Name: "backend", Value: "auto", Usage: backendUsage},
		&cli.IntFlag{Name: "device", Usage: "the NVIDIA GPU to run on, from 0 (for cuda and auto; default 0); on a machine of several GPUs, one process per GPU (batch --shard I/N splits the jobs)"},
		&cli.IntFlag{Name: "chunk", Usage: "prefill chunk size in tokens: bounds temporary memory for long prompts (default: the backend's, 512 on cpu and metal, 16384 on cuda)"},
		&cli.IntFlag{Name: "max-context", Usage: "most tokens per sequence (default: the model's max_position_embeddings)"},
		&cli.StringFlag{Name: "chat-template", Usage: "a Jinja chat template file to use instead of the model's own"},
	}
}

func readModelOptions(c *cli.Context) modelOptions {
	return modelOptions{
		Model: c.String("model"), Backend: c.String("backend"), Device: gpuFlag{N: c.Int("device"), Set: c.IsSet("device")}, Chunk: c.Int("chunk"),
		MaxContext: c.Int("max-context"), ChatTemplate: c.String("chat-template"),
	}
}

const backendUsage = "where to run, NAME[:KEY=VALUE,...]: auto (the default: cuda where a usable NVIDIA GPU is present, else cpu; not yet metal, which has not run on Apple hardware); cpu, with options " + cpu.OptionsHelp +
	" (e.g. cpu:delta=chunked); cuda (an NVIDIA GPU of compute capability 9.0 or newer, through the driver alone), with options " +
	cuda.OptionsHelp + " (e.g. cuda:kv=bf16); metal (macOS with Apple silicon; not yet run on Apple hardware: petal doctor checks it), with options " +
	metal.OptionsHelp + " (e.g. metal:kv=bf16)"

// gpuFlag is --device: the GPU's ordinal, and whether it was given.
type gpuFlag struct {
	N   int
	Set bool
}

// newBackend opens the backend spec names, on the default GPU for cuda.
func newBackend(spec string, warn func(string)) (backend.Backend, error) {
	return newBackendOn(spec, gpuFlag{}, warn)
}

// newBackendOn opens the backend spec names on GPU dev (--device) where
// it was given: for cuda and auto; the CPU takes only --device 0.
func newBackendOn(spec string, dev gpuFlag, warn func(string)) (backend.Backend, error) {
	if strings.TrimSpace(spec) == "" {
		spec = "auto"
	}
	if dev.Set && dev.N < 0 {
		return nil, usageErr("--device %d: want a GPU number from 0", dev.N)
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
		return autoBackend(dev, warn)
	case "cpu":
		if dev.Set && dev.N != 0 {
			return nil, usageErr("--device %d: --backend %s runs on the CPU, which has no GPU to choose; --device is for cuda (and auto)", dev.N, spec)
		}
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
		what := fmt.Sprintf("--backend %s", spec)
		if dev.Set {
			if named := deviceOption(sp); named && o.Device != dev.N {
				return nil, usageErr("--device %d conflicts with --backend %s (GPU %d): name the GPU once", dev.N, spec, o.Device)
			}
			o.Device, what = dev.N, fmt.Sprintf("--device %d", dev.N)
		}
		if err := checkGPU(o.Device, what); err != nil {
			return nil, err
		}
		o.Notice = warn // the driver compiling the kernels on a first run: half a minute of silence otherwise
		b, err := newCUDA(o)
		if err != nil {
			return nil, usageErr("--backend %s: %v", spec, err)
		}
		return b, nil
	case "metal":
		if dev.Set && dev.N != 0 {
			return nil, usageErr("--device %d: --backend %s runs on the Mac's own GPU, which has none to choose; --device is for cuda (and auto)", dev.N, spec)
		}
		o, err := metal.ParseOptions(sp.Options)
		if err != nil {
			return nil, usageErr("--backend %s: %v", spec, err)
		}
		b, err := newMetal(o)
		if err != nil {
			return nil, usageErr("--backend %s: %s", spec, strings.TrimPrefix(err.Error(), "metal: "))
		}
		return b, nil
	}
	return nil, usageErr("--backend %s: unknown backend (auto, cpu, cuda, metal)", spec)
}

func deviceOption(sp backend.Spec) bool {
	for _, kv := range sp.Options {
		if kv.Key == "device" {
			return true
		}
	}
	return false
}

// checkGPU refuses a GPU ordinal past the ones the driver sees, naming how
// many there are; where the driver cannot tell, opening the GPU says why.
func checkGPU(ordinal int, what string) error {
	n, err := gpuCount()
	if err != nil || ordinal < n {
		return nil
	}
	switch n {
	case 1:
		return usageErr("%s: this machine has 1 NVIDIA GPU (0)", what)
	default:
		return usageErr("%s: this machine has %d NVIDIA GPUs (0-%d)", what, n, n-1)
	}
}

// gpuCount is how many GPUs the driver sees; a variable so tests can stand
// in for a machine of several.
var gpuCount = func() (int, error) {
	devs, err := driver.Devices()
	return len(devs), err
}

// autoBackend is CUDA where a usable NVIDIA GPU is present, else Metal on
// macOS with Apple silicon where a Metal device opens, else the CPU. A
// machine without CUDA at all (no driver, no GPU, not Linux) goes on
// quietly; a GPU that is there but cannot be used (too old, a driver
// fault) gets a warning that says why, and so does a Mac whose Metal
// device does not open. A --device other than 0 must be a GPU that can be
// used: neither the CPU nor a Mac has one to choose.
func autoBackend(dev gpuFlag, warn func(string)) (backend.Backend, error) {
	o := cuda.DefaultOptions()
	if dev.Set {
		if err := checkGPU(dev.N, fmt.Sprintf("--device %d", dev.N)); err != nil {
			return nil, err
		}
		o.Device = dev.N
	}
	o.Notice = warn
	b, err := newCUDA(o)
	if err == nil {
		return b, nil
	}
	if dev.N != 0 {
		return nil, usageErr("--device %d: the NVIDIA GPU cannot be used (%v), and the CPU has no GPU to choose", dev.N, err)
	}
	if !driver.Unavailable(err) && warn != nil {
		warn(fmt.Sprintf("--backend auto: the NVIDIA GPU cannot be used (%v); running on the CPU", err))
	}
	if autoMetal {
		b, err := newMetal(metal.DefaultOptions())
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, device.ErrUnsupported) && warn != nil {
			warn(fmt.Sprintf("--backend auto: the Metal device cannot be used (%v); running on the CPU", err))
		}
	}
	return cpu.New(), nil
}

// onMac: macOS with Apple silicon, where the Metal backend opens (and
// petal doctor checks it).
var onMac = runtime.GOOS == "darwin" && runtime.GOARCH == "arm64"

// autoMetal: auto tries Metal after CUDA (on a Mac: the rule is tested with
// it on). Off until the Metal backend has run on Apple hardware: auto does
// not choose a backend that has never run; --backend metal opts in and
// petal doctor checks it.
var autoMetal = false

// newMetal opens the Metal backend on the system default device; a
// variable so tests can stand in for a Mac.
var newMetal = func(o metal.Options) (backend.Backend, error) {
	b, err := metal.Open(o)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// newCUDA opens the CUDA backend; a variable so tests can stand in for a
// machine with or without a usable GPU.
var newCUDA = func(o cuda.Options) (backend.Backend, error) { return cuda.New(o) }

// openEngine resolves the model and opens it on the chosen backend.
func openEngine(st *Streams, o modelOptions) (*engine.Engine, string, error) {
	warn := func(msg string) { fmt.Fprintln(st.Err, "petal:", msg) }
	be, err := newBackendOn(o.Backend, o.Device, warn)
	if err != nil {
		return nil, "", err
	}
	if o.Chunk < 0 {
		return nil, "", usageErr("--chunk %d: want at least 1", o.Chunk)
	}
	chunkAsked := o.Chunk > 0
	if !chunkAsked {
		o.Chunk = backend.DefaultChunk(be)
	}
	if o.MaxContext < 0 {
		return nil, "", usageErr("--max-context %d: want a positive number", o.MaxContext)
	}
	dir, name, err := resolveModel(o.Model, st.Getenv)
	if err != nil {
		return nil, "", usageErr("%v", err)
	}
	if o.Chunk, err = checkDeviceFit(be, dir, o, !chunkAsked, warn); err != nil {
		return nil, "", err
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

// deviceMemory is a backend on a GPU that can say how much of its memory
// is free (the CUDA backend).
type deviceMemory interface {
	Device() driver.Device
	MemInfo() (free, total int64, err error)
}

// checkDeviceFit refuses, before any weight is uploaded, a model that does
// not fit in the free memory of the backend's GPU at --max-context. Without
// --max-context the KV cache grows with each sequence: then only the
// weights, state and workspace must fit, and a warning gives the longest
// context that does where the model's positions do not. With chooseChunk
// (no --chunk given) it returns the largest of o.Chunk, its half, quarter,
// ... down to 512 with which the model fits, saying so where that is not
// o.Chunk (a GPU with room for the weights but not for a 16384-token
// chunk's workspace, a 24 GB card and the 35B model, still runs in smaller
// chunks); else o.Chunk. Backends in host memory are not checked here. A
// checkpoint that cannot be read is left to engine.Open to report.
func checkDeviceFit(be backend.Backend, dir string, o modelOptions, chooseChunk bool, warn func(string)) (int, error) {
	dm, ok := be.(deviceMemory)
	if !ok {
		return o.Chunk, nil
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return o.Chunk, nil
	}
	defer ck.Close()
	d, err := model.NewDims(&ck.Config)
	if err != nil {
		return o.Chunk, nil
	}
	context := o.MaxContext
	if context <= 0 {
		context = modelPositions(&ck.Config)
	}
	free, total, err := dm.MemInfo()
	if err != nil {
		return o.Chunk, fmt.Errorf("reading the free memory of the GPU: %w", err)
	}
	dev := dm.Device()
	gpu := fmt.Sprintf("GPU %d (%s)", dev.Ordinal, dev.Name)
	shadowed := false
	if s, ok := be.(interface{ KVShadowed() bool }); ok {
		shadowed = s.KVShadowed()
	}
	base := deviceNeed(ck, &d, o.Chunk, context, kvType(be), shadowed)
	needAt := func(chunk int) cuda.Need {
		n := base
		n.Chunk, n.Workspace = chunk, deviceWorkspace(&d, min(chunk, context))
		return n
	}
	// fits: all of it, or without --max-context at least a short sequence
	fits := func(n cuda.Need) bool {
		return cuda.Fit(n, free, total, gpu) == nil || o.MaxContext <= 0 && n.FittingContext(free) >= 1
	}
	chunk := min(o.Chunk, context) // a pass holds at most the context (engine.Open)
	if chooseChunk {
		for c := chunk; c >= 512; c /= 2 {
			if fits(needAt(c)) {
				if c != chunk && warn != nil {
					warn(fmt.Sprintf("prefill in chunks of %d tokens: with chunks of %d the model does not fit in the GPU's free memory (--chunk N chooses)", c, chunk))
				}
				chunk = c
				break
			}
		}
	}
	need := needAt(chunk)
	err = cuda.Fit(need, free, total, gpu)
	if err == nil || o.MaxContext > 0 {
		return chunk, err
	}
	fit := need.FittingContext(free)
	if fit < 1 {
		return chunk, err // not even a short sequence fits
	}
	if warn != nil {
		warn(fmt.Sprintf("%s has room for a KV cache of at most %d tokens (%s free), not the model's %d positions: the cache grows with each sequence, and a longer one will fail; --max-context %d sizes it up front",
			gpu, fit, gib(free), context, fit))
	}
	return chunk, nil
}

// modelPositions is the context a model supports, as engine.Open takes it.
func modelPositions(c *checkpoint.Config) int {
	if c.MaxPositionEmbeddings > 0 {
		return c.MaxPositionEmbeddings
	}
	return 32768
}

// kvType is the element type of be's KV caches (float32 unless it says).
func kvType(be backend.Backend) backend.DType {
	if t, ok := be.(backend.KVCacheTyper); ok {
		return t.KVCacheType()
	}
	return backend.F32
}

// deviceNeed is the device memory of a model on the CUDA backend, by part:
//
//	weights    Σ over quantised matrices of UploadedMatrixBytes (packed words,
//	           bf16 scales and biases, 256-byte aligned, the interleaved
//	           scale/bias copy of 4-bit groups of 64, the descriptor)
//	           + Σ over other tensors of 4·elements (uploaded as float32)
//	KV cache   context · full-attention layers · 2 (K, V) · KV heads · head dim · sizeof(kv)
//	KV copy    for an f32 cache, shadowed: the KV cache's size in bf16 (every
//	           layer's bf16 shadow, cuda's kvshadow=on, the default); not
//	           shadowed: context · 2 · KV heads · head dim · 2 (prefill's bf16
//	           copy of one layer's, kvcopy)
//	state      Gated DeltaNet layers · (value heads · value dim · key dim + (conv K − 1) · conv channels) · 4
//	workspace  one chunk's activations and temporaries (bench.WorkspaceBytes)
//	           + the logits of every position of a scoring chunk
//	           (min(chunk, model.AllLogitsChunk) · vocab · 4)
//
// and cuda.Need.Margin on top.
func deviceNeed(ck *checkpoint.Checkpoint, d *model.Dims, chunk, context int, kv backend.DType, shadowed bool) cuda.Need {
	n := cuda.Need{
		Weights:    deviceWeightBytes(ck),
		KVPerToken: bench.KVBytesPerToken(d, kv.Size()),
		KVCopy:     bench.KVCopyBytesPerToken(d, kv.Size()),
		State:      bench.StateBytes(d),
		Workspace:  deviceWorkspace(d, min(chunk, context)), // a pass holds at most the context (engine.Open)
		Context:    context,
		Chunk:      chunk,
		KV:         kv,
	}
	if shadowed && kv == backend.F32 {
		n.Shadow, n.KVCopy, n.CopyOnly = true, bench.KVBytesPerToken(d, 2), n.KVCopy
	}
	n.KVCache = n.KVPerToken * int64(context)
	return n
}

// deviceWorkspace is one chunk's activations and temporaries and the logits
// of every position of it (deviceNeed's workspace).
func deviceWorkspace(d *model.Dims, chunk int) int64 {
	return bench.WorkspaceBytes(d, chunk) + bench.AllLogitsBytes(d, min(chunk, model.AllLogitsChunk))
}

// deviceWeightBytes is the text model's weights as the CUDA backend's
// Upload lays them out.
func deviceWeightBytes(ck *checkpoint.Checkpoint) int64 {
	var n int64
	counted := map[string]bool{}
	for _, name := range ck.Names() {
		module, ok := strings.CutSuffix(name, ".scales")
		if !ok {
			continue
		}
		q := ck.Quant(module)
		w, wok := ck.Tensor(module + ".weight")
		b, bok := ck.Tensor(module + ".biases")
		s, _ := ck.Tensor(name)
		if !q.Quantized() || !wok || !bok {
			continue
		}
		n += cuda.UploadedMatrixBytes(int64(len(w.Data)), int64(len(s.Data)), int64(len(b.Data)), q.Bits, q.GroupSize)
		counted[module+".weight"], counted[name], counted[module+".biases"] = true, true, true
	}
	for _, name := range ck.Names() {
		if t, ok := ck.Tensor(name); ok && !counted[name] {
			n += cuda.UploadedVectorBytes(int64(t.NumElements()))
		}
	}
	return n
}

func gib(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }
