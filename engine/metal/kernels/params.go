package kernels

// The Go twins of params.h's structs, in the same field order: what the host
// passes as a kernel's parameter bytes. TestParamsMatchHeader checks them
// against the header, whose static_asserts fix the same layouts in MSL,
// OpenCL C++ and CUDA.

type QmvParams struct{ Rows, Cols, Team int32 }

type RouteParams struct{ Experts, Cols, Topk, Normalize int32 }

type GdnParams struct {
	Hk, Hv int32
	Eps    float32
}

type QKPrepParams struct {
	MaxPos, QH, KVH, Rot int32
	Eps                  float32
}

type AttnSplitParams struct{ KVH, MaxSplits, MinChunk int32 }

type AttnCombineParams struct{ MaxSplits, MinChunk int32 }

type MoeUpParams struct{ I, H, Team int32 }

type MoeDownParams struct{ H, I, Team int32 }
