package cli

import (
	"errors"
	"io"
	"os"
	"petal/bench"
	"strings"
	"testing"

	"petal/engine/backend"
	"petal/engine/checkpoint"
	"petal/engine/cpu"
	"petal/engine/cuda"
	"petal/engine/cuda/driver"
	"petal/engine/model"
	"petal/engine/quant"
)

// the CUDA backend is what the fit check recognises
var _ deviceMemory = (*cuda.Backend)(nil)

// fakeGPU stands in for an opened CUDA backend: it computes on the CPU and
// reports the free and total memory it is given; it counts uploads, and
// sums them as the CUDA backend lays them out.
type fakeGPU struct {
	backend.Backend
	ordinal     int
	free, total int64
	uploads     int
	uploaded    int64
	shadowed    bool // KVShadowed: kvshadow=on
}

func (g *fakeGPU) KVShadowed() bool { return g.shadowed }

func (g *fakeGPU) Device() driver.Device { return driver.Device{Ordinal: g.ordinal, Name: "Fake H200"} }
func (g *fakeGPU) PrefillChunk() int     { return cuda.PrefillChunkTokens }
func (g *fakeGPU) MemInfo() (int64, int64, error) {
	return g.free, g.total, nil
}
func (g *fakeGPU) Upload(m quant.Matrix) (backend.Matrix, error) {
	g.uploads++
	g.uploaded += cuda.UploadedMatrixBytes(int64(4*len(m.Words)), int64(2*len(m.Scales)), int64(2*len(m.Biases)), m.Bits, m.GroupSize)
	return g.Backend.Upload(m)
}

// stubGPUs makes this a machine of n GPUs whose CUDA backend is gpu (its
// ordinal set to the one asked for), until the test ends.
func stubGPUs(t *testing.T, n int, gpu *fakeGPU) *cuda.Options {
	oldCount, oldNew := gpuCount, newCUDA
	t.Cleanup(func() { gpuCount, newCUDA = oldCount, oldNew })
	var asked cuda.Options
	gpuCount = func() (int, error) { return n, nil }
	newCUDA = func(o cuda.Options) (backend.Backend, error) {
		asked = o
		gpu.ordinal = o.Device
		return gpu, nil
	}
	return &asked
}

// TestDeviceFlag: --device chooses the GPU for cuda and auto; it must agree
// with cuda:device=M; past the GPUs there are it names how many; the CPU
// takes only 0.
func TestDeviceFlag(t *testing.T) {
	gpu := &fakeGPU{Backend: cpu.New()}
	asked := stubGPUs(t, 2, gpu)
	for _, tc := range []struct {
		spec   string
		dev    gpuFlag
		device int    // the GPU opened
		err    string // else the error
	}{
		{"cuda", gpuFlag{1, true}, 1, ""},
		{"cuda", gpuFlag{}, 0, ""},
		{"cuda:device=1", gpuFlag{}, 1, ""},
		{"cuda:device=1", gpuFlag{1, true}, 1, ""},
		{"cuda:kv=bf16", gpuFlag{1, true}, 1, ""},
		{"auto", gpuFlag{1, true}, 1, ""},
		{"auto", gpuFlag{}, 0, ""},
		{"cuda:device=0", gpuFlag{1, true}, 0, "--device 1 conflicts with --backend cuda:device=0 (GPU 0)"},
		{"cuda", gpuFlag{3, true}, 0, "--device 3: this machine has 2 NVIDIA GPUs (0-1)"},
		{"auto", gpuFlag{2, true}, 0, "--device 2: this machine has 2 NVIDIA GPUs (0-1)"},
		{"cuda:device=5", gpuFlag{}, 0, "--backend cuda:device=5: this machine has 2 NVIDIA GPUs (0-1)"},
		{"cuda", gpuFlag{-1, true}, 0, "--device -1: want a GPU number from 0"},
		{"cpu", gpuFlag{1, true}, 0, "--device 1: --backend cpu runs on the CPU"},
	} {
		*asked = cuda.Options{Device: -1}
		be, err := newBackendOn(tc.spec, tc.dev, nil)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %+v: %v, want %q", tc.spec, tc.dev, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s %+v: %v", tc.spec, tc.dev, err)
		case be != gpu || asked.Device != tc.device:
			t.Errorf("%s %+v: opened %s on GPU %d, want GPU %d", tc.spec, tc.dev, be.Name(), asked.Device, tc.device)
		}
	}
	if be, err := newBackendOn("cpu", gpuFlag{0, true}, nil); err != nil || be.Name() != "cpu" {
		t.Errorf("cpu with --device 0: %v", err)
	}
	gpuCount = func() (int, error) { return 1, nil }
	if _, err := newBackendOn("cuda", gpuFlag{1, true}, nil); err == nil || !strings.Contains(err.Error(), "this machine has 1 NVIDIA GPU (0)") {
		t.Errorf("one GPU: %v", err)
	}
	// no CUDA here: auto falls back to the CPU for --device 0, not for 1
	gpuCount = func() (int, error) { return 0, driver.ErrNoDevice }
	newCUDA = func(cuda.Options) (backend.Backend, error) { return nil, driver.ErrNoDevice }
	if be, err := newBackendOn("auto", gpuFlag{0, true}, nil); err != nil || be.Name() != "cpu" {
		t.Errorf("auto --device 0 without a GPU: %v, want the CPU", err)
	}
	if _, err := newBackendOn("auto", gpuFlag{1, true}, nil); err == nil || !strings.Contains(err.Error(), "--device 1: the NVIDIA GPU cannot be used") {
		t.Errorf("auto --device 1 without a GPU: %v", err)
	}
	// the flag reaches every model command
	if code, _, errs := runMain(t, Streams{}, "run", "--backend", "cpu", "--device", "2", "hello"); code != 2 || !strings.Contains(errs, "--device 2") {
		t.Errorf("run --backend cpu --device 2: exit %d, stderr %q", code, errs)
	}
}

// tinyNeed is the device need of the embedded model at context tokens.
func tinyNeed(t *testing.T, chunk, context int, kv backend.DType, shadowed bool) cuda.Need {
	dir, _, err := resolveModel("", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	d, err := model.NewDims(&ck.Config)
	if err != nil {
		t.Fatal(err)
	}
	return deviceNeed(ck, &d, chunk, context, kv, shadowed)
}

// TestDeviceFitShadow: under kvshadow=on every layer's bf16 shadow of the
// f32 KV cache counts in the device memory a context needs: the need
// without it is refused, with it the model loads.
func TestDeviceFitShadow(t *testing.T) {
	const ctx = 4096
	need := tinyNeed(t, 512, ctx, backend.F32, false)
	shadowed := tinyNeed(t, 512, ctx, backend.F32, true)
	if shadowed.KVCopy != need.KVPerToken/2 {
		t.Fatalf("the shadow %d bytes a token, want half the f32 cache's %d", shadowed.KVCopy, need.KVPerToken)
	}
	gpu := &fakeGPU{Backend: cpu.New(), total: 1 << 40, shadowed: true}
	stubGPUs(t, 1, gpu)
	st := &Streams{Err: io.Discard, Getenv: os.Getenv}
	o := modelOptions{Backend: "cuda", Device: gpuFlag{0, true}, Chunk: 512, MaxContext: ctx}
	gpu.free = need.Total()
	var fe *cuda.FitError
	if _, _, err := openEngine(st, o); !errors.As(err, &fe) || !strings.Contains(err.Error(), "its bf16 shadow") || !strings.Contains(err.Error(), "kvshadow=off") {
		t.Fatalf("room for the cache but not its shadows: %v, want a FitError naming the bf16 shadow and kvshadow=off", err)
	}
	gpu.free = shadowed.Total()
	e, _, err := openEngine(st, o)
	if err != nil {
		t.Fatalf("room for the shadows too: %v", err)
	}
	e.Close()
}

// TestDeviceFit: a model that does not fit in the GPU's free memory is
// refused before any weight is uploaded, with the numbers; one that fits
// loads; without --max-context a GPU with room for less than the model's
// positions gets a warning and loads.
func TestDeviceFit(t *testing.T) {
	const ctx = 4096
	need := tinyNeed(t, 512, ctx, backend.F32, false)
	gpu := &fakeGPU{Backend: cpu.New(), total: 1 << 40}
	stubGPUs(t, 2, gpu)
	var errs strings.Builder
	st := &Streams{Err: &errs, Getenv: os.Getenv}
	o := modelOptions{Backend: "cuda", Device: gpuFlag{1, true}, Chunk: 512, MaxContext: ctx}

	gpu.free = need.Total() - 1
	_, _, err := openEngine(st, o)
	var fe *cuda.FitError
	if !errors.As(err, &fe) {
		t.Fatalf("one byte short: %v, want a FitError", err)
	}
	for _, want := range []string{"GPU 1 (Fake H200)", "KV cache", "for 4096 tokens in f32", "weights", "is free", "--max-context", "kv=bf16"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q: %v", want, err)
		}
	}
	if gpu.uploads > 0 {
		t.Errorf("%d matrices uploaded before the refusal", gpu.uploads)
	}

	gpu.free = need.Total()
	e, _, err := openEngine(st, o)
	if err != nil {
		t.Fatalf("exactly enough: %v", err)
	}
	e.Close()
	// the estimate's weights are what was uploaded, plus the float32 vectors
	if gpu.uploaded == 0 || need.Weights < gpu.uploaded || need.Weights > gpu.uploaded*11/10 {
		t.Errorf("weights estimated at %d bytes; the matrices uploaded take %d", need.Weights, gpu.uploaded)
	}

	// bf16 halves the KV cache
	if half := tinyNeed(t, 512, ctx, backend.BF16, false); half.KVCache*2 != need.KVCache || half.KVCache == 0 {
		t.Errorf("bf16 KV cache %d, f32 %d", half.KVCache, need.KVCache)
	}

	// no --max-context: the model's positions do not fit, a shorter context does
	o.MaxContext = 0
	full := tinyNeed(t, 512, e.Checkpoint.Config.MaxPositionEmbeddings, backend.F32, false)
	gpu.free = full.Total() - full.KVCache/2
	errs.Reset()
	e, _, err = openEngine(st, o)
	if err != nil {
		t.Fatalf("without --max-context: %v", err)
	}
	e.Close()
	if !strings.Contains(errs.String(), "has room for a KV cache of at most") || !strings.Contains(errs.String(), "--max-context") {
		t.Errorf("without --max-context: warning %q", errs.String())
	}
	// nor the weights: refused
	gpu.free = full.Weights / 2
	if _, _, err := openEngine(st, o); !errors.As(err, &fe) {
		t.Errorf("weights past the free memory: %v", err)
	}

	// no --chunk: the backend's default where it fits, else the largest
	// smaller one that does, said on stderr; an asked --chunk is kept
	o.MaxContext, o.Chunk = ctx, 0
	for _, tc := range []struct {
		free  int64
		chunk int
		note  bool
	}{
		{tinyNeed(t, cuda.PrefillChunkTokens, ctx, backend.F32, false).Total(), min(cuda.PrefillChunkTokens, ctx), false}, // no pass longer than the context
		{tinyNeed(t, 1024, ctx, backend.F32, false).Total(), 1024, true},
		{tinyNeed(t, 512, ctx, backend.F32, false).Total(), 512, true},
	} {
		gpu.free = tc.free
		errs.Reset()
		e, _, err := openEngine(st, o)
		if err != nil {
			t.Fatalf("%d bytes free: %v", tc.free, err)
		}
		if e.Model.Chunk != tc.chunk || strings.Contains(errs.String(), "prefill in chunks of") != tc.note {
			t.Errorf("%d bytes free: chunks of %d, stderr %q; want %d", tc.free, e.Model.Chunk, errs.String(), tc.chunk)
		}
		e.Close()
	}
	o.Chunk = 4096
	gpu.free = tinyNeed(t, 1024, ctx, backend.F32, false).Total()
	if _, _, err := openEngine(st, o); !errors.As(err, &fe) || !strings.Contains(err.Error(), "--chunk") {
		t.Errorf("--chunk 4096 asked, room for 1024: %v, want a FitError naming --chunk", err)
	}
}

// TestDeviceWorkspaceScoringRows: the workspace counts a chunk's
// activations at its full length but a scoring pass's logits at
// model.AllLogitsChunk rows at most (a 16384-token chunk of the 35B model
// would otherwise count 15 GiB of logits), and no more rows than the
// context holds.
func TestDeviceWorkspaceScoringRows(t *testing.T) {
	d, err := model.NamedDims("qwen3.6-35b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	long := model.AllLogitsChunk * 4
	if got, want := deviceWorkspace(&d, long), bench.WorkspaceBytes(&d, long)+bench.AllLogitsBytes(&d, model.AllLogitsChunk); got != want {
		t.Errorf("chunk %d: workspace %d, want %d (the logits of %d rows)", long, got, want, model.AllLogitsChunk)
	}
	if got, want := deviceWorkspace(&d, 512), bench.WorkspaceBytes(&d, 512)+bench.AllLogitsBytes(&d, 512); got != want {
		t.Errorf("chunk 512: workspace %d, want %d", got, want)
	}
	if a, b := tinyNeed(t, long, 1000, backend.F32, false), tinyNeed(t, 1000, 1000, backend.F32, false); a.Workspace != b.Workspace {
		t.Errorf("a %d-token chunk at a context of 1000: workspace %d, want that of 1000 tokens, %d", long, a.Workspace, b.Workspace)
	}
}
