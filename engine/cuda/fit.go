package cuda

import (
	"fmt"
	"strings"

	"petal/engine/backend"
)

// Need is the device memory a model needs on this backend, by part, in
// bytes. The caller fills it from the model's sizes (UploadedMatrixBytes
// and UploadedVectorBytes for the weights; the KV cache, state and
// workspace from the model's dimensions); Fit compares it with a GPU.
type Need struct {
	Weights    int64         // every weight as Upload lays it out
	KVCache    int64         // KVPerToken · Context
	State      int64         // the Gated DeltaNet layers' conv and recurrent state (float32)
	Workspace  int64         // one prefill chunk's activations and temporaries, logits
	KVPerToken int64         // K and V of one token in every full-attention layer, in KV's type
	KVCopy     int64         // a token's share of the bf16 copies of an F32 cache: one layer's, which prefill's flash attention reads (kvcopy), or every layer's shadow (kvshadow=on)
	Shadow     bool          // KVCopy is every layer's shadow (kvshadow=on)
	CopyOnly   int64         // KVCopy under kvshadow=off, where Shadow: one layer's copy a token
	Context    int           // tokens the KV cache is sized for
	Chunk      int           // tokens of the prefill chunk the workspace is sized for (0: not said)
	KV         backend.DType // the KV cache's element type
}

// Margin is kept free beyond the estimate, for what it does not count: the
// matrices' descriptors and the RoPE tables, the sampler's buffers, the
// doubling of the backend's growing temporaries (grower), the driver's
// allocation granularity. 512 MiB plus 3% of the estimate.
func (n Need) Margin() int64 { return 512<<20 + n.estimate()*3/100 }

func (n Need) estimate() int64 {
	return n.Weights + n.KVCache + n.KVCopyBytes() + n.State + n.Workspace
}

// KVCopyBytes is the bf16 copies of K and V at Context tokens.
func (n Need) KVCopyBytes() int64 { return n.KVCopy * int64(n.Context) }

// Total is the estimate and the margin.
func (n Need) Total() int64 { return n.estimate() + n.Margin() }

// FittingContext is the longest context whose KV cache fits in free bytes
// beside everything else; 0 when not even that fits.
func (n Need) FittingContext(free int64) int {
	rest := n
	rest.KVCache, rest.KVCopy = 0, 0
	left := free - rest.estimate() - rest.Margin()
	if left <= 0 || n.KVPerToken <= 0 {
		return 0
	}
	// the margin grows by 3% of the KV cache too
	return int(left * 100 / 103 / (n.KVPerToken + n.KVCopy))
}

// UploadedMatrixBytes is the device memory Upload takes for a quantised
// matrix whose words, scales and biases are the given bytes: each part
// 256-byte aligned (UploadQMatrix), the interleaved scale/bias copy of a
// 4-bit matrix in groups of 64 (UploadScaleBias: 4 bytes a group, the
// scales' and biases' bytes again) and the 48-byte descriptor.
func UploadedMatrixBytes(words, scales, biases int64, bits, group int) int64 {
	n := align256(words) + align256(scales) + align256(biases) + align256(qdescBytes)
	if bits == 4 && group == 64 {
		n += align256(scales + biases)
	}
	return n
}

// UploadedVectorBytes is the device memory a float vector of n elements
// takes: the model uploads them as float32.
func UploadedVectorBytes(n int64) int64 { return align256(4 * n) }

func align256(n int64) int64 { return (n + 255) &^ 255 }

// FitError refuses a model that does not fit in a GPU's free memory.
type FitError struct {
	Need        Need
	Free, Total int64
	GPU         string // e.g. "GPU 0 (NVIDIA H200)"
}

func (e *FitError) Error() string {
	n := e.Need
	var b strings.Builder
	kvCopy := ""
	switch {
	case n.Shadow && n.KVCopy > 0:
		kvCopy = fmt.Sprintf(", its bf16 shadow %s", gib(n.KVCopyBytes()))
	case n.KVCopy > 0:
		kvCopy = fmt.Sprintf(", its bf16 copy %s", gib(n.KVCopyBytes()))
	}
	fmt.Fprintf(&b, "the model does not fit on %s: it needs %s (weights %s, KV cache %s for %d tokens in %s%s, recurrent state %s, workspace %s, margin %s) and %s of %s is free",
		e.GPU, gib(n.Total()), gib(n.Weights), gib(n.KVCache), n.Context, n.KV, kvCopy, gib(n.State), gib(n.Workspace), gib(n.Margin()),
		gib(e.Free), gib(e.Total))
	var fixes []string
	if fit := n.FittingContext(e.Free); fit > 0 {
		fixes = append(fixes, fmt.Sprintf("a smaller --max-context (at most %d tokens fit)", fit))
		if n.KV == backend.F32 {
			half := n
			half.KV, half.KVPerToken, half.KVCache, half.KVCopy = backend.BF16, n.KVPerToken/2, n.KVCache/2, 0
			fixes = append(fixes, fmt.Sprintf("--backend cuda:kv=bf16 (half the KV cache: %d tokens fit)", half.FittingContext(e.Free)))
			if n.Shadow {
				plain := n
				plain.Shadow, plain.KVCopy = false, n.CopyOnly
				fixes = append(fixes, fmt.Sprintf("--backend cuda:kvshadow=off (no bf16 shadow of the f32 cache, slower decode at long context: %d tokens fit)", plain.FittingContext(e.Free)))
			}
		}
	}
	if n.Chunk > 512 {
		fixes = append(fixes, fmt.Sprintf("a smaller --chunk (the workspace of %d-token chunks is %s)", n.Chunk, gib(n.Workspace)))
	}
	if e.Free < e.Total*9/10 {
		fixes = append(fixes, fmt.Sprintf("freeing the GPU (%s is in use by other processes)", gib(e.Total-e.Free)))
	}
	fixes = append(fixes, "a GPU with more memory (--device N chooses another)")
	fmt.Fprintf(&b, "; use %s", strings.Join(fixes, ", or "))
	return b.String()
}

// Fit refuses n where it does not fit in free bytes of the GPU's total.
func Fit(n Need, free, total int64, gpu string) error {
	if n.Total() <= free {
		return nil
	}
	return &FitError{Need: n, Free: free, Total: total, GPU: gpu}
}

// PrefillChunk is the backend's default prefill chunk (PrefillChunkTokens).
func (b *Backend) PrefillChunk() int { return PrefillChunkTokens }

// PrefillChunkTokens is the CUDA backend's default prefill chunk. On
// the H200 (docs/bench/cuda/2026-12-01-group1) prefill of 4K and 16K
// tokens ran at 8,543 and 7,846 tok/s in chunks of 512, 11,526 and 11,027
// in 1024, 13,996 and 13,302 in 2048, 14,959 and 14,209 in 4096: the MoE's
// grouped GEMMs read every expert's weights once per chunk, so a chunk of
// 512 (16 rows per expert) is bound by those reads. On an H100
// (2026-12-06-defaults1) prefill of 32K and 128K tokens ran at 30,294 and
// 19,324 tok/s in chunks of 4096, 31,388 and 19,839 in 8192, 32,086 and
// 20,214 in 16384 (each chunk also copies the f32 KV rows it reads to bf16
// once, and its delta rule and attention start once); the cost is peak
// device memory, 30.4 GiB against 27.1 at 128K. Where a chunk's workspace
// does not fit, cli takes the largest half, quarter, ... that does.
const PrefillChunkTokens = 16384

// MemInfo returns the free and total memory of the backend's GPU.
func (b *Backend) MemInfo() (free, total int64, err error) { return b.ctx.MemInfo() }

func gib(n int64) string { return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30)) }
