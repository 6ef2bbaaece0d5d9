package kernels

// The Go twins of params.h's structs, in the same field order: what the host
// passes as a kernel's parameter bytes. TestParamsMatchHeader checks them
// against the header, whose static_asserts fix the same layouts in MSL,
// OpenCL C++ and CUDA.

type QmvParams struct{ Rows, Cols, Team int32 }

type QmvGroupParams struct {
	Start0, Start1, Start2, Start3, End, N, Cols, Team, HasDelta int32
	Eps                                                          float32
}

type RouteParams struct{ Experts, Cols, Topk, Normalize int32 }

type RouteNormParams struct {
	Experts, Cols, Topk, Normalize, HasDelta int32
	Eps                                      float32
}

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

type QShape struct{ Rows, Cols, Bits, Group, Wpr, Gpr int32 }

type NormParams struct {
	Dim, HasDelta int32
	Eps           float32
}

type GemmParams struct{ T, Ldy int32 }

type ConvParams struct{ Rows, C, K int32 }

type DeltaParams struct{ Rows, Hk, Dk, Hv, Dv int32 }

type GatedNormParams struct {
	Count, Dim int32
	Eps        float32
}

type QKPrepRowsParams struct {
	MaxPos, QH, KVH, D, Rot int32
	Eps                     float32
}

type AttnRowsParams struct{ Rows, QH, KVH, D int32 }

type RouteRowsParams struct{ E, TopK, Normalize int32 }

type ExpertsParams struct{ Rows, Dim, TopK, Inter, Sinter int32 }

type AdvanceParams struct{ By int32 }

type ConvertParams struct {
	N        uint32
	From, To int32
}

type SampleParams struct{ V, FastOn int32 }

type LogprobsParams struct{ V, TopN int32 }

type MmaCheckParams struct{ Col0, Transpose int32 }

type GemmDenseParams struct{ M, N, K int32 }

type GemmGroupParams struct{ N, K int32 }

type MoeRouteParams struct{ T, E, BM int32 }

type MoeCombineParams struct{ N, Add int32 }

type SharedSwigluParams struct{ Inter, N int32 }
