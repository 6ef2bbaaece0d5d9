package metal

import (
	"fmt"

	"petal/engine/backend"
)

// Options choose, for ablations and checks, among kernels that compute the
// same thing.
type Options struct {
	// Fused lets one-row ops run on the decode kernels (qmv, route, moe,
	// attn, gdn) where their shapes fit, as engine/cuda's lowering does;
	// off, every op takes the generic kernels of ops.metal.
	Fused bool
	// KV is the element type of the KV caches: F32 (also 0) or BF16.
	KV backend.DType
	// SimdGEMM lets ops of several rows (prefill chunks) run on
	// gemm.metal's simdgroup-matrix GEMMs where their matrices fit (4-bit
	// in groups of 64; for Experts top-8 with every width a multiple of
	// 64), as engine/cuda's gemm=tc takes gemm.cu's; off, they take
	// ops.metal's plain tiled GEMM and MoE. Off by default until the
	// kernels have run on a GPU.
	SimdGEMM bool
	// TensorGEMM (with SimdGEMM; gemm=tensor) takes those GEMMs on
	// gemm_tensor.metal's Metal 4 tensor operations (matmul2d, the M5's
	// neural accelerators) instead of simdgroup matrices, where the device
	// has them (dispatch.TensorOps, asked at New); where it has not, New
	// clears it, says so on stderr, and prefill keeps gemm=simd. Off by
	// default: nothing of it has run on Apple hardware.
	TensorGEMM bool
	// FusedNorms runs the add-and-norm of one token inside the kernels of
	// the op that reads it (with Fused), as engine/cuda's norms=fused:
	// before the MoE's router on route.metal's route_logits_norm and
	// route_select_norm (one dispatch and one barrier fewer), before a
	// layer's first projections on qmv.metal's qmv_group_norm, the normed
	// row bit for bit add_rmsnorm's. Off by default until the kernels have
	// run on a GPU.
	FusedNorms bool
	// CopyWeights copies every matrix's codes, scales and biases into
	// buffers of their own; off (weights=mapped, the default), those lying
	// in the checkpoint's memory maps are bound there as no-copy buffers
	// (MapRegions), so that a Mac does not hold the weights twice while
	// loading (about 20 GB for the 35B model). On, for an ablation and as
	// a way out where wrapping fails.
	CopyWeights bool
	// SamplerTopK (sampler=topk) takes sample.metal's top-k fast path, as
	// engine/cuda's sampler=topk takes sample.cu's, for a sampled token
	// with a top-k of 1 to 64 (the model's defaults: 20): sample_prep's
	// threadgroups each leave their k best, sample_row does engine/sample's
	// arithmetic, in its order, over the k best of those; off
	// (sampler=row), sample_row's radix selections over the whole row in
	// one threadgroup. The two choose the same id but at a near-tie, where
	// their float32 sums (in other orders) may part. The default, as on
	// CUDA, where it made decode with the model's defaults 39 % faster on
	// an H100; not yet timed on Apple hardware. A top-k of 0 or over 64
	// takes the row path either way.
	SamplerTopK bool
	// SyncEach waits after every op, so that an error of the device names
	// the op that caused it (slow).
	SyncEach bool
}

// DefaultOptions are the settings of "--backend metal".
func DefaultOptions() Options { return Options{Fused: true, KV: backend.F32, SamplerTopK: true} }

// OptionsHelp lists the options of "--backend metal:KEY=VALUE,...".
const OptionsHelp = `fused=on|off (the decode kernels for one-token ops; default on), ` +
	`gemm=tensor|simd|plain (simd: prefill's 4-bit GEMMs and MoE on gemm.metal's simdgroup matrices, bf16 inputs with float32 sums; ` +
	`tensor: the same on Metal 4's tensor operations, gemm_tensor.metal's matmul2d, the M5's neural accelerators, ` +
	`where the device has them (an Apple10 GPU in MTLGPUFamilyMetal4, MSL 4.0), else simd, saying so on stderr; ` +
	`both run on an NVIDIA GPU through the CUDA dialect's emulation, not yet on Apple hardware, ` +
	`so the default is plain: ops.metal's float32 tiled GEMM), ` +
	`norms=fused|apart (fused: the norms of one token inside the kernels of the router and of the first projections; ` +
	`without a grid-wide ticket it saves no dispatch on Metal, so the default is apart), ` +
	`kv=f32|bf16 (element type of the KV cache; default f32), ` +
	`weights=mapped|copy (mapped: the weights bound in place in the checkpoint's memory maps, as no-copy buffers; ` +
	`copy: copied into buffers of their own, the checkpoint then held twice while loading; default mapped), ` +
	`sampler=topk|row (a sampled token's choice: topk: with a top-k of 1 to 64, over the k best of 128 threadgroups' k best; ` +
	`row: one threadgroup's radix selections over the whole row; the same choice but at a near-tie, where their float32 sums may part; default topk), ` +
	`sync=run|op (op: wait after every op so that a GPU error names it; slow; default run)`

// ParseOptions reads the options of a backend Spec named metal.
func ParseOptions(opts []backend.Option) (Options, error) {
	o := DefaultOptions()
	for _, kv := range opts {
		var err error
		var run bool
		switch kv.Key {
		case "fused":
			o.Fused, err = kv.On("metal")
		case "gemm":
			switch kv.Value {
			case "tensor":
				o.SimdGEMM, o.TensorGEMM = true, true
			case "simd", "plain":
				o.SimdGEMM, o.TensorGEMM = kv.Value == "simd", false
			default:
				err = fmt.Errorf("metal: gemm=%q: want tensor, simd or plain", kv.Value)
			}
		case "norms":
			o.FusedNorms, err = kv.Is("metal", "fused", "apart")
		case "kv":
			o.KV, err = kv.KVType("metal")
		case "weights":
			var mapped bool
			mapped, err = kv.Is("metal", "mapped", "copy")
			o.CopyWeights = !mapped
		case "sampler":
			o.SamplerTopK, err = kv.Is("metal", "topk", "row")
		case "sync":
			run, err = kv.Is("metal", "run", "op")
			o.SyncEach = !run
		default:
			return Options{}, fmt.Errorf("metal: unknown option %q (the options are %s)", kv.Key, OptionsHelp)
		}
		if err != nil {
			return Options{}, err
		}
	}
	return o, nil
}
