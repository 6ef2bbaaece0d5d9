// params.h: the parameter structs of petal's GPU kernels, one per entry
// family, bound by the host as one small constant buffer (Metal: setBytes
// at the index after the buffers).
//
// Plain C++ that three compilers read: Apple's Metal compiler (the .metal
// kernels; the Go side inlines this file into the source it compiles),
// clang-19 in OpenCL C++ mode (check.sh on Linux) and clang-19 in CUDA mode
// (the .metal sources run on an NVIDIA GPU through cuda/metal_stdlib, and
// the .cu kernels, which take these values as separate arguments today).
// The static_asserts fix each layout in all three; params.go holds the Go
// twins and params_test.go checks them against this file. Fields are 4-byte
// int, uint or float only, so no dialect pads differently.
#pragma once

#define PETAL_LAYOUT(T, size) static_assert(sizeof(T) == (size), #T " is not " #size " bytes: params.go must change with it")
#define PETAL_FIELD(T, f, off) static_assert(__builtin_offsetof(T, f) == (off), #T "." #f " is not at byte " #off)

// qmv.metal: y = W·x, W rows x cols MLX affine 4-bit; team lanes share a row.
struct QmvParams {
  int rows;
  int cols;
  int team;
};
PETAL_LAYOUT(QmvParams, 12);
PETAL_FIELD(QmvParams, team, 8);

// qmv.metal's grouped entries: up to four matrices of cols inputs in one
// dispatch (a QLinearGroup), matrix m's rows being launch rows start<m> ..
// start<m+1>-1, the last's ending at end; starts past the n matrices are
// end. hasDelta and eps are qmv_group_norm's add-and-norm (h += delta
// where hasDelta is not 0, x = h/rms(h)·w), unused by qmv_group.
struct QmvGroupParams {
  int start0;
  int start1;
  int start2;
  int start3;
  int end;
  int n;
  int cols;
  int team;
  int hasDelta;
  float eps;
};
PETAL_LAYOUT(QmvGroupParams, 40);
PETAL_FIELD(QmvGroupParams, end, 16);
PETAL_FIELD(QmvGroupParams, team, 28);
PETAL_FIELD(QmvGroupParams, eps, 36);

// route.metal: the router of one token over experts rows of cols inputs.
struct RouteParams {
  int experts;
  int cols;
  int topk;
  int normalize;
};
PETAL_LAYOUT(RouteParams, 16);
PETAL_FIELD(RouteParams, normalize, 12);

// route.metal's route_logits_norm and route_select_norm: the router of
// one token with the add-and-norm before it (h += delta where hasDelta is
// not 0, x = h/rms(h)·w over cols).
struct RouteNormParams {
  int experts;
  int cols;
  int topk;
  int normalize;
  int hasDelta;
  float eps;
};
PETAL_LAYOUT(RouteNormParams, 24);
PETAL_FIELD(RouteNormParams, normalize, 12);
PETAL_FIELD(RouteNormParams, eps, 20);

// gdn.metal: the Gated DeltaNet step, Hk key heads, Hv value heads.
struct GdnParams {
  int Hk;
  int Hv;
  float eps;
};
PETAL_LAYOUT(GdnParams, 12);
PETAL_FIELD(GdnParams, eps, 8);

// attn.metal: q/k preparation and the KV write at row *pos.
struct QKPrepParams {
  int maxPos;
  int QH;
  int KVH;
  int rot;
  float eps;
};
PETAL_LAYOUT(QKPrepParams, 20);
PETAL_FIELD(QKPrepParams, eps, 16);

// attn.metal: split attention over KVH key heads.
struct AttnSplitParams {
  int KVH;
  int maxSplits;
  int minChunk;
};
PETAL_LAYOUT(AttnSplitParams, 12);
PETAL_FIELD(AttnSplitParams, minChunk, 8);

// attn.metal: the merge of the splits with the output gate.
struct AttnCombineParams {
  int maxSplits;
  int minChunk;
};
PETAL_LAYOUT(AttnCombineParams, 8);
PETAL_FIELD(AttnCombineParams, minChunk, 4);

// moe.metal: gate and up of the routed and shared experts (I rows each,
// H inputs).
struct MoeUpParams {
  int I;
  int H;
  int team;
};
PETAL_LAYOUT(MoeUpParams, 12);
PETAL_FIELD(MoeUpParams, team, 8);

// moe.metal: down of the routed and shared experts (H rows, I inputs each).
struct MoeDownParams {
  int H;
  int I;
  int team;
};
PETAL_LAYOUT(MoeDownParams, 12);
PETAL_FIELD(MoeDownParams, team, 8);

// ops.metal and sample.metal: the generic kernels of every op at any
// number of rows (ops.cu, sample.cu; there the values are separate
// arguments).

// A quantised matrix's shape, the QDesc of engine/cuda/kernels/rowmath.h
// without its pointers (its codes, scales and biases are buffers of their
// own): rows counts every row of an expert stack; wpr and gpr are the
// 32-bit words and groups of a row.
struct QShape {
  int rows;
  int cols;
  int bits;
  int group;
  int wpr;
  int gpr;
};
PETAL_LAYOUT(QShape, 24);
PETAL_FIELD(QShape, gpr, 20);

// add_rmsnorm: rows of dim; h += delta first where hasDelta is not 0.
struct NormParams {
  int dim;
  int hasDelta;
  float eps;
};
PETAL_LAYOUT(NormParams, 12);
PETAL_FIELD(NormParams, eps, 8);

// qgemm: T rows of x, y rows ldy apart.
struct GemmParams {
  int T;
  int ldy;
};
PETAL_LAYOUT(GemmParams, 8);
PETAL_FIELD(GemmParams, ldy, 4);

// conv_silu: rows of C channels, K taps.
struct ConvParams {
  int rows;
  int C;
  int K;
};
PETAL_LAYOUT(ConvParams, 12);
PETAL_FIELD(ConvParams, K, 8);

// delta_rule: rows tokens, Hk key heads of Dk, Hv value heads of Dv.
struct DeltaParams {
  int rows;
  int Hk;
  int Dk;
  int Hv;
  int Dv;
};
PETAL_LAYOUT(DeltaParams, 20);
PETAL_FIELD(DeltaParams, Dv, 16);

// gated_rmsnorm: count (row, head) vectors of dim.
struct GatedNormParams {
  int count;
  int dim;
  float eps;
};
PETAL_LAYOUT(GatedNormParams, 12);
PETAL_FIELD(GatedNormParams, eps, 8);

// qk_prep_rows: QH query and KVH key heads of D, rot rotary dims.
struct QKPrepRowsParams {
  int maxPos;
  int QH;
  int KVH;
  int D;
  int rot;
  float eps;
};
PETAL_LAYOUT(QKPrepRowsParams, 24);
PETAL_FIELD(QKPrepRowsParams, eps, 20);

// attn_rows: rows query rows of QH heads over KVH key heads of D.
struct AttnRowsParams {
  int rows;
  int QH;
  int KVH;
  int D;
};
PETAL_LAYOUT(AttnRowsParams, 16);
PETAL_FIELD(AttnRowsParams, D, 12);

// route_select_rows: rows of E logits, the topK chosen.
struct RouteRowsParams {
  int E;
  int topK;
  int normalize;
};
PETAL_LAYOUT(RouteRowsParams, 12);
PETAL_FIELD(RouteRowsParams, normalize, 8);

// experts_gate_up, experts_down: rows of dim, topK routed experts of
// inter rows and a shared one of sinter.
struct ExpertsParams {
  int rows;
  int dim;
  int topK;
  int inter;
  int sinter;
};
PETAL_LAYOUT(ExpertsParams, 20);
PETAL_FIELD(ExpertsParams, sinter, 16);

// advance: *pos += by.
struct AdvanceParams {
  int by;
};
PETAL_LAYOUT(AdvanceParams, 4);
PETAL_FIELD(AdvanceParams, by, 0);

// convert: n elements from type from to type to (0 f32, 1 bf16, 2 f16).
struct ConvertParams {
  uint n;
  int from;
  int to;
};
PETAL_LAYOUT(ConvertParams, 12);
PETAL_FIELD(ConvertParams, to, 8);

// sample_prep and sample_row: a row of V logits; fastOn 1 where the
// backend's sampler=topk lets them take the top-k fast path.
struct SampleParams {
  int V;
  int fastOn;
};
PETAL_LAYOUT(SampleParams, 8);
PETAL_FIELD(SampleParams, fastOn, 4);

// logprobs_row: a row of V logits, the topN most likely reported.
struct LogprobsParams {
  int V;
  int topN;
};
PETAL_LAYOUT(LogprobsParams, 8);
PETAL_FIELD(LogprobsParams, topN, 4);

// gemm.metal's gemm_mma8_check: b's 8x8 block at column col0 of an 8x16
// tile, read transposed where transpose is not 0.
struct MmaCheckParams {
  int col0;
  int transpose;
};
PETAL_LAYOUT(MmaCheckParams, 8);
PETAL_FIELD(MmaCheckParams, transpose, 4);

// gemm.metal's gemm_dense_*: Y[M, N] = X[M, K]·Wᵀ.
struct GemmDenseParams {
  int M;
  int N;
  int K;
};
PETAL_LAYOUT(GemmDenseParams, 12);
PETAL_FIELD(GemmDenseParams, K, 8);

// gemm.metal's grouped gemm_gateup (N: an expert's inter rows, K: hidden)
// and gemm_down (N: hidden, K: inter).
struct GemmGroupParams {
  int N;
  int K;
};
PETAL_LAYOUT(GemmGroupParams, 8);
PETAL_FIELD(GemmGroupParams, K, 4);

// gemm.metal's moe_route: T tokens' top-8 ids over E experts, in tiles of
// BM rows.
struct MoeRouteParams {
  int T;
  int E;
  int BM;
};
PETAL_LAYOUT(MoeRouteParams, 12);
PETAL_FIELD(MoeRouteParams, BM, 8);

// gemm.metal's moe_combine: rows of N, added to out where add is not 0.
struct MoeCombineParams {
  int N;
  int add;
};
PETAL_LAYOUT(MoeCombineParams, 8);
PETAL_FIELD(MoeCombineParams, add, 4);

// gemm.metal's moe_shared_swiglu: n values, rows of inter.
struct SharedSwigluParams {
  int inter;
  int n;
};
PETAL_LAYOUT(SharedSwigluParams, 8);
PETAL_FIELD(SharedSwigluParams, n, 4);
