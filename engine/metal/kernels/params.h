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

// route.metal: the router of one token over experts rows of cols inputs.
struct RouteParams {
  int experts;
  int cols;
  int topk;
  int normalize;
};
PETAL_LAYOUT(RouteParams, 16);
PETAL_FIELD(RouteParams, normalize, 12);

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
