package cuda

import (
	"fmt"
	"strconv"
	"strings"

	"petal/engine/backend"
)

// Options choose the GPU and, for ablations and checks, among kernels that
// compute the same thing.
type Options struct {
	// Device is the GPU's ordinal (0 for the first).
	Device int
	// Graphs captures each compiled program of at most graphMaxRows rows
	// (a decode step, a short prompt chunk) as a CUDA graph that Run
	// replays (one launch from the host per program); off, and for longer
	// chunks, Run launches the kernels one by one.
	Graphs bool
	// Fused lets one-row ops run on the decode kernels (qmv, route, moe,
	// attn, gdn) where their shapes fit; off, they take the plain kernels
	// of ops.cu (ops of several rows: see TensorCores). The Gated DeltaNet
	// kernel runs a conv, delta rule and gated norm in one launch and
	// leaves the conv's and the rule's outputs unwritten: it is used only
	// where no later op of the program reads them.
	Fused bool
	// TensorCores runs the ops of several rows (prefill's chunks) that the
	// 4-bit tensor-core GEMMs of gemm.cu take on them: QLinear and
	// QLinearGroup through the dense GEMM, Experts (top-8) through the
	// grouped MoE GEMMs over device-side routing; x is rounded to bf16
	// going in, sums are float32 (relative error about 3e-3, one bf16
	// rounding). Off, those ops run the float32 kernels of ops.cu.
	TensorCores bool
	// WGMMA (gemm=wg) lets those GEMMs take gemm_wg.cu's tiles, their
	// products on Hopper's wgmma, where tiles of 64 rows or more are
	// chosen, on a GPU of compute capability 9.0 (elsewhere it is
	// gemm=tc): the same products and float32 sums, in another order.
	// WGRegA (gemm=wgr) takes the register-A wgmma tiles
	// (w256r, w128r, w64r: the weights dequantised by each thread into its
	// own A fragment, no W tile in shared memory) where gemm=wg takes
	// w256o, w128o2 and w64o: the dense GEMMs at 4096 rows 2-9 % faster,
	// the MoE at 1024 tokens 10 % (docs/bench/cuda/2026-12-06-wgr1).
	WGMMA, WGRegA bool
	// WGUndrained (gemm=wgrp, the default) is gemm=wgr with w256rp,
	// w128rp and w64rp: the same tiles with their k-tiles not drained, the
	// dense GEMMs at 4096 rows 3-5 % faster; with attn=wgp, prefill of
	// 4K-16K tokens 1-2 % (docs/bench/cuda/2026-12-06-pipe2, -defaults1).
	WGUndrained bool
	// WGProducer (gemm=wgrs) is gemm=wgrp with the dense GEMMs of 256-row
	// tiles on gemm_ws.cu's w256rs: a ninth warp issues the copies and
	// hands the stages over by mbarriers, so that the two warpgroups of
	// products never wait at a block-wide barrier (Nsight Compute had
	// w256rp's warps stalled at its barrier 0.90 and on memory 0.74 of the
	// 7.05 cycles between their issued instructions,
	// docs/bench/cuda/2026-12-07-ncu2). The same bits as wgrp, but
	// slower: 273-287 TFLOP/s at 4096 rows against w256rp's 489-549 on an
	// H100 with the producer three k-tiles ahead and one arrival a
	// consumer warp (fw4; fw3, every thread arriving: 276-293; fw2, one
	// k-tile ahead: 159-164). Off by default.
	WGProducer bool
	// WGThree (gemm=wgr3) is gemm=wgrp with the dense GEMMs of 256-row
	// tiles on gemm_ws.cu's w256r3: three warpgroups of 64 weight rows
	// against the 256 X rows, so that each warp's instruction stream (an
	// estimated 1,600 cycles a k-tile in w256rp, from ncu2's 7.05 cycles an
	// instruction) has half again as many products to keep the tensor
	// cores busy for, and each X tile read serves 192 weight rows. The
	// same bits as wgrp, but no faster than w256rp at 4096 rows (304 against
	// 298 us at q_proj's shape on an H100, fw2) and slower at smaller
	// outputs, whose 192-row blocks leave multiprocessors idle. Off by
	// default.
	WGThree bool
	// MoE is the kernel of prefill's grouped MoE GEMMs at up to 16 rows an
	// expert on average (prompts of up to 512 tokens on 256 experts):
	// MoESmem, through the bf16 W tile in shared memory that the larger
	// tiles use; MoEReg, gemm_rq, which dequantises each thread's weights
	// in registers as the mma's operands; MoEStream, gemm_stream, whose
	// warps stream their own weight rows with no barrier in the k loop,
	// 16 rows a tile: the MoE at 512 tokens 7-14 % faster than MoESmem's
	// m32 on an H100 with even and skewed routing (2026-12-06-report6,
	// -pipe1); MoEWG, the default, the register-A wgmma tile w32r on a GPU
	// of compute capability 9.0 (elsewhere MoEStream): 12 % faster than
	// s16 at 512 tokens routed evenly, 7-12 % skewed (2026-12-06-host1).
	// The same products and float32 sums, in another order.
	MoE MoEKernel
	// MoEFit (moefit=on, and under moefit=width, the default) sizes
	// prefill's MoE tiles to the rows an expert gets where a 128-row tile
	// leaves about half the experts a second, nearly empty, tile: w160rp
	// from 97 to 144 rows an expert on average (4K tokens), under gemm=wgrp. The MoE at 4096
	// tokens routed evenly 773 against 891 µs on an H100, prefill of 4K
	// tokens +0.3 / +2.2 / +1.3 % in three pairs of runs (2026-12-06-
	// deltacl1: the synthetic model's router sends an expert more uneven
	// counts). MoEFitAll (moefit=all) adds w80rp from 57 to 72 rows (2K
	// tokens): its MoE 519 against 579 µs routed evenly, but prefill of 2K
	// tokens -1.3 / +0.4 / -1.8 %, so not by default.
	MoEFit, MoEFitAll bool
	// MoEFitWidth (moefit=width, the default) is moefit=on with w160rw in
	// w160rp's place (gemm_fitw.cu): each tile's products as wide as its
	// live rows, 64 to 160 in steps of 16 or 32, chosen once a block. An
	// expert of 128 rows takes a 128-row tile's products, not a 160-row
	// one's: at 4096 tokens the 160-row tiles are 80 % full on average.
	// The same oracle figures; the MoE at 4096 tokens routed evenly 717.7
	// against 733.6 us on an H100 (gate/up 344.9 against 358.4, fw2);
	// prefill of 4K tokens 44,396 / 44,242 tok/s against moefit=on's
	// 43,314 / 43,375, 16K +0.8 / -0.2 %, 512 and 1K within their noise
	// (fw4, two rounds, an H100).
	MoEFitWidth bool
	// MoEYsBF16 (moeys=bf16, the default) has prefill's MoE down GEMM
	// write each expert's output row in bf16 (gemm_downbf.cu) and the
	// combine add them back in float32, where the tile is one of
	// DownBFTiles: half the bytes written and read back (268 MB each way
	// in float32 at 4096 tokens, a layer). Each expert output rounded once
	// to bf16, as a bf16 model's are: a lower precision than float32's,
	// so moeys=f32 keeps the float32 outputs. On an H100 the combine at
	// 4096 tokens 60 against 103 us, the down GEMM the same, prefill of 4K
	// and 16K tokens 1.1-1.8 % faster (docs/bench/cuda/2026-12-07-moeys1),
	// and +1.4 / +2.5 / +1.5 % at 512 / 4K / 16K in the thirteenth report's
	// ablation, two runs each against the defaults swept again
	// (bench/results/2026-12-07-h100-cuda-13); the oracle within its
	// bfloat16 bars (top-1 98.8-100 %, mean KL 7.4e-5 to 2.2e-4).
	MoEYsBF16 bool
	// MoEGroupBlocks (moegroup=blocks, the default) groups a prefill
	// chunk's (token, slot) pairs by expert through moe_group.cu's three
	// kernels, the pairs counted and placed by many blocks, where
	// moe_route8 takes one block (43.6 us a layer at 4096 tokens on an
	// H100, 2026-12-07-moeys1). Prefill of 4K and 16K tokens 1.3-2.2 %
	// faster in two rounds on an H100, 512 the same, the oracle's figures
	// unchanged (2026-12-07-group1); moegroup=one keeps moe_route8.
	MoEGroupBlocks bool
	// NormBF16 (normbf=on, the default) has a prompt chunk's input norm
	// and Gated DeltaNet gated norm write their output's bf16 copy too
	// (norm_bf.cu) for the tensor-core GEMM that reads it next (the
	// in_proj, out_proj), which then needs no gemm_to_bf16: 70 launches
	// fewer in a 40-layer chunk, the same bits. Prefill 0.2-2.4 % faster
	// at 512 / 4K / 16K in two rounds on an H100, the oracle's figures
	// those of the default (2026-12-07-normbf1).
	NormBF16 bool
	// NormBF16MoE (normbf=moe) is normbf=on with a prompt chunk's
	// post-attention norm writing the bf16 copy its MoE's GEMMs read too,
	// in place of the conversion at the start of the experts: the router
	// still reads the float32 row. One launch and about 48 MB of traffic
	// fewer a layer at 4K tokens; the same bits (TestNormBF16MoEMatchesApart).
	// The default (normbf=moe): with normf32=lean, prefill of 4K / 16K
	// tokens 1.5-2.4 / 0.6-1.9 % faster than neither on an H100 in three
	// alternating rounds, lean alone 0.7-1.9 / 0.4-1.2 % (2026-12-07-norms1);
	// the oracle's figures those of the defaults (2026-12-07-report21).
	NormBF16MoE bool
	// NormF32Lean (normf32=lean) has normbf's norms leave their float32
	// output unwritten where the GEMMs after them, which read the bf16
	// copy, are its only readers before the program writes over it
	// (backend.Overwritten): norm_bfo.cu's kernels, a pass of 4 bytes an
	// element fewer (the gated norm's 64 MB and the input norm's 32 MB a
	// layer at 4K tokens). The same bits everywhere read
	// (TestNormF32LeanMatchesFull); the default (normf32=lean), measured
	// with normbf=moe above.
	NormF32Lean bool
	// CombineNorm (combinenorm=on) leaves a prompt chunk's MoE combine
	// (moe_combine_bf: the shared expert's output plus each token's eight
	// bf16 expert outputs, weighted) to the next layer's input norm
	// (norm_comb.cu's add_rmsnorm_comb_bf), which sums it where it would
	// have read it back: a write and a read of a float32 row a token fewer
	// (33.5 MB each a layer at 4096 tokens) and a launch, where the MoE's
	// output is read by that norm alone (backend.Overwritten) and the norm
	// takes normbf's form; elsewhere the combine runs as before. The same
	// sums in the same order, the same bits (TestCombineNormMatchesApart).
	// Prefill of 4K and 16K tokens within 0.8 % of off on an H100 (two
	// rounds, docs/bench/cuda/2026-12-08-combo1): off by default.
	CombineNorm bool
	// QKRowsWarp (qkrows=warp, the default) prepares a prompt chunk's
	// queries and keys (their norms, RoPE, the caches' rows) with
	// qk_rows.cu's warp a row over every head, where ops.cu's qk_prep_rows
	// takes a block of 256 threads a (head, row) and a block-wide sum
	// behind two barriers; the f32 cache's bf16 shadow written from the
	// same registers. The same bits (block_sum's order of sums,
	// TestQKRowsMatchPrep). Heads of 256 values with 64 rotated only. On
	// an H100 attn.qk_prep 0.8 % of prefill at 4K against 1.7 %, prefill
	// of 4K tokens 1.4-1.6 % and of 16K 0.7-1.3 % faster than qkrows=block
	// in two alternating rounds (docs/bench/cuda/2026-12-07-qkrows2).
	QKRowsWarp bool
	// FlashAttention runs the Attention of 64 or more query rows (a
	// prefill chunk) on the flash kernels of attn_prefill.cu: tensor cores,
	// bf16 operands, float32 sums and softmax; off, the plain float32
	// kernel of ops.cu.
	FlashAttention bool
	// GroupGEMM (linears=group) runs the dense GEMMs of several matrices
	// reading one x (a QLinearGroup of several rows: the Gated DeltaNet's
	// in_proj with its 32-row b and a, attention's q/k/v, the shared
	// expert's gate and up) in one launch; apart, one launch a matrix.
	GroupGEMM bool
	// FlashWide (attn=wide) runs that attention on the flash_wide kernels:
	// 128 query rows a block, the next key tile's copies in flight while a
	// tile's products run.
	FlashWide bool
	// FlashWG (attn=wg) takes, on a GPU of compute capability
	// 9.0, the flash attention of attn_prefill_wg.cu for heads of 256 over
	// a bf16 cache (an f32 one through KVCopy's copy): flash_wide's rows
	// and softmax with the products on wgmma, 1.7x its throughput at long
	// context on an H100 (2026-12-06-flashwg1); elsewhere it is attn=wide.
	FlashWG bool
	// FlashWGPipe (attn=wgp, the default) is FlashWG with
	// flash_wgp_bf16_d256, whose warpgroups run a tile's softmax while the
	// tile before's P·V runs: 449-464 TFLOP/s against flash_wg's 425-433
	// at 28K-127K, prefill of 128K tokens 2.3 % faster on an H100
	// (2026-12-06-pipe2, -pipebench1).
	FlashWGPipe bool
	// FlashWGOver (attn=wgo) is FlashWGPipe with attn_prefill_wgo.cu's
	// flash_wgo_bf16_d256: flash_wgp's arithmetic written so that ptxas
	// keeps the products pipelined (flash_wgp's machine code waits for
	// each of its 24 wgmma a tile on its own, ptxas's note C7513, so its
	// softmax never ran beside P·V), 212 registers and no spills against
	// 255 and 16 bytes under ptxas 12.4. The same outputs.
	FlashWGOver bool
	// SplitK (splitk=on) splits the columns of the dense GEMMs that take
	// the 16-row tile (a few rows: too few tiles to fill the GPU, each
	// walking all of K) several ways, the partials added in order by a
	// second kernel (GEMM.DenseSplit). SplitKGroups (splitk=all, the
	// default) splits a QLinearGroup's grouped launch too: a prompt of 16
	// tokens 12.3 ms against 14.2 unsplit on an H100 (2026-12-06-report6).
	SplitK, SplitKGroups bool
	// Router is the kernel of the router's logits of several tokens
	// (prefill): RouterI8WG (the default), RouterI8W and RouterI8, exact
	// integer products of x's 8-bit parts and float64 sums (route_i8w.cu's
	// qgemm_i8_wg2 and qgemm_i8_w, route_i8.cu's qgemm_i8); RouterF64,
	// float64 on the tensor cores (ops.cu's qgemm_f64: every product
	// exact, float64 sums); RouterPlain, the float32 kernels qgemm and
	// qgemm_s.
	Router RouterKernel
	// FusedNorms runs the add-and-norm of one token inside the kernel of
	// the op that reads it (with Fused): before the MoE's router in
	// route.cu's route_norm, before a layer's first projections in qmv.cu's
	// qmv_group_norm; two launches fewer per layer, the same bits.
	FusedNorms bool
	// MoELayer runs the MoE block of one token (the post-attention
	// add-and-norm, the router, the experts) as one launch, moe.cu's
	// moe_layer, whose blocks meet at two grid-wide barriers, instead of
	// three (route_norm, moe_gate_up, moe_down); with Fused and FusedNorms.
	// The same bits either way.
	MoELayer bool
	// PDL launches kernels with programmatic stream serialization
	// (programmatic dependent launch): the next kernel is launched, and its
	// blocks placed, while the one before it runs, and waits for it inside
	// (pdl_begin in kernels/device.h), which hides the gap between
	// dependent kernels; off, plain launches. PDLSome limits it to the
	// kernels of pdlGainers (pdl=some): launched early, a kernel's blocks
	// are placed where the kernel before left room, and some kernels
	// (moe_down, attn_combine) then ran slower than launched after it
	// while every kernel let the next launch at its start (pdlpre1). Now
	// a kernel lets it at pdl_trigger, before a last block's tail, or as
	// its blocks retire, and pdl=on is the default: against pdl=some on an
	// H100 (pdltrig2), decode at 4K 1 % faster, at 32K the same, prefill
	// of 4K tokens 1.5 % faster. Under it moe_gate_up lets moe_down launch
	// right after its wait, and moe_down reads the router's choice and asks
	// L2 for its rows before its own wait, so they stream in while
	// moe_gate_up runs (rnpre2, an H100: decode at 4K 2.1 % faster, at 32K
	// 3.5 %); the router's rows, the shared expert's and the Gated
	// DeltaNet state are asked for before their kernels' waits too, and
	// the single mat-vec lets the router launch right after its own wait
	// (rnpre3, an H100: 1.6 % more at 4K, 1.5 % at 32K).
	PDL, PDLSome bool
	// SamplerTopK (sampler=topk) takes sample.cu's top-k fast path for a
	// sampled token with a top-k of 1 to 64 (the model's defaults: 20):
	// sample_prep's blocks each leave their k best, sample_row does the
	// host's arithmetic over the k best of those, the same choice bit for
	// bit; off (sampler=row), sample_row's radix selections over the whole
	// row in one block: with the model's defaults decode at 4K took 425
	// tok/s under topk against 305 under row on an H100
	// (2026-12-06-sampled2). The default; a top-k of 0 or over 64 takes
	// the row path either way.
	SamplerTopK bool
	// FastQMV is the mat-vec with x in two int8 parts (relative error about
	// 5e-5) instead of three (float32's error).
	FastQMV bool
	// ChunkedDelta runs the delta rule of prefill (DeltaRule ops not fused
	// into the decode kernel, heads of 128) in the chunked form of
	// gdn_chunk.cu, blocks of 32 tokens on the tensor cores; off, the
	// sequential kernel of ops.cu steps through the tokens one at a time.
	ChunkedDelta bool
	// DeltaTF32 (delta=tf32; the default's products) takes the chunked form with the
	// state pass of gdn_chunk_tf32.cu: one tf32 product a pair of operands
	// (about 2^-11 relative) where gdn_chunk.cu's (delta=chunked) take
	// three (about 2^-21); the state itself stays float32. The rule's inputs
	// come from GEMMs of bf16-rounded activations (2^-9), so the products'
	// rounding stays below what its inputs already carry: its outputs are
	// up to 7e-3 of the RMS from the float64 reference's against 1.2e-5,
	// the oracle's figures the same either way. The delta rule at 4096
	// tokens 601 against 756 us, prefill of 4K and 16K tokens 4.0-4.5 %
	// faster in two rounds on an H100 (docs/bench/cuda/2026-12-07-walk2;
	// delta1 measured 2.9-3.8 %).
	DeltaTF32 bool
	// DeltaFrag (delta=tf32frag, the default) is delta=tf32 with its workspace laid
	// out for the state pass's fragments (gdn_chunk_frag.cu): the prep
	// writes W, γ·Q and the masked q·k rounded to tf32 in the order of the
	// tensor cores' A fragments and the decayed K in the B fragments', so
	// that the state pass reads a fragment with one 16- or 8-byte load
	// where it took four or two loads and roundings (a quarter of its
	// instructions; Nsight Compute had the pass bound by issue and shared
	// memory, docs/bench/cuda/2026-12-07-ncu2). The same bits as delta=tf32
	// (TestChunkedDeltaFragMatchesTF32, fw2 on an H100), the oracle's
	// figures the same to the digit. The delta rule with its prep 586
	// against 613 us at 4096 tokens (fw2); prefill at 16K 0.4-0.9 % faster,
	// at 4K -0.03 to +0.8 %, in two rounds each with and without the late
	// copies (docs/bench/cuda/2026-12-07-fw3).
	DeltaFrag bool
	// DeltaFlow (deltaflow=on) runs delta=tf32frag's prep and state pass
	// at once (gdn_chunk_flow.cu): the prep's blocks, two a
	// multiprocessor, write the blocks of tokens in order and raise a flag
	// a (value head, block) as each is written; the state pass, launched
	// beside them under pdl=on, fetches a block once its flag is up. The
	// same arithmetic, the same bits (TestChunkedDeltaFlowMatchesFrag). On
	// an H100 (docs/bench/cuda/2026-12-07-flowtrace1) the two kernels run
	// together, 561 µs a layer at 4096 tokens against the defaults' 278 +
	// 299, but the prep at two blocks a multiprocessor beside the state
	// pass takes 553 µs, and the state pass waits on it; prefill of 4K
	// tokens -0.04 to +1.2 % in two rounds (dstate1). Off until the prep
	// is faster.
	DeltaFlow bool
	// DeltaFlowPair (deltaflow=pair) is DeltaFlow with deltapair's prep
	// (gdn_chunk_pairflow.cu's gdn_chunk_prep_pair_flow: a block of 256
	// threads a multiprocessor beside a state block, two value heads of a
	// key head a task, both heads' flags raised), where a key head has an
	// even number of value heads; gdn_chunk_prep_flow elsewhere. The same
	// bits. Not yet measured.
	DeltaFlowPair bool
	// DeltaPair (deltapair=on) runs delta=tf32frag's prep a block for two
	// value heads of one key head (gdn_chunk_pair.cu's
	// gdn_chunk_prep_pair, 256 threads): the queries and keys read and
	// normalised, and q·k and k·k taken, once for both, where the prep
	// does each for every value head. The same workspace, the same bits
	// (TestChunkedDeltaPairMatchesFrag). Where a key head has an odd
	// number of value heads, and under deltaflow, the prep as before. The
	// default: on an H100 the delta rule at 4096 tokens 552 against 567 µs,
	// at 512 86 against 92; prefill of 4K tokens +0.5-1.3 %, of 16K
	// +0.9-1.1 % in two rounds (docs/bench/cuda/2026-12-08-pair1).
	DeltaPair bool
	// SharedSide (sharedside=on) runs a prompt chunk's shared expert (its
	// gate logit, gate and up, SwiGLU and down) on a second stream, forked
	// once the MoE's input norm is queued and joined by the combine, so
	// that its GEMMs run beside the router, the grouping and the routed
	// experts' GEMMs (a CUDA graph captures it as a branch). The same
	// kernels on the same data: the same bits (TestSharedSideMatchesApart).
	// Not where the combine is left to the next norm (combinenorm=on). Not
	// yet measured.
	SharedSide bool
	// ConvGEMM (convgemm=on) makes a prompt chunk's Gated DeltaNet conv
	// (ConvSiLU) in the epilogue of the in_proj GEMM that writes its input
	// (gemm_conv.cu: the 256-row tile's outputs, staged in shared memory,
	// through the conv for each row from the tile's fourth on), and its
	// first three rows of each tile in conv_fix: conv_silu's arithmetic,
	// the same bits (TestConvGEMMMatchesApart), without writing the raw
	// projection but for the rows conv_fix reads and reading it back. Where
	// the in_proj takes gemm_group_w256rp after its norm (normbf) and no
	// other op reads the raw projection. Not yet measured.
	ConvGEMM bool
	// GDNCluster (gdnnorm=cluster, the default) takes gdn_cl.cu's decode
	// step: the gated norm of a value head through a thread-block cluster
	// of its blocks (their sums of squares read from each other's shared
	// memory), not a ticket, a fence and the last block reading the head's
	// outputs back. Decode 0.3-0.6 % faster at 256 / 4K / 16K in two
	// rounds on an H100 (2026-12-06-deltacl1), the same outputs.
	GDNCluster bool
	// KV is the element type of the KV caches: F32 (also 0) or BF16.
	KV backend.DType
	// KVShadow (kvshadow=on) keeps a bf16 shadow of each float32 KV cache
	// (shadow.go): a decoded token's attention reads it with the bf16
	// kernels, half the bytes of the float32 rows, and prefill's flash
	// attention reads it instead of KVCopy's copy a chunk. The float32
	// cache stays the state sessions save; the rows attention reads are
	// rounded to bf16 as prefill's tensor cores round them. The default:
	// decode at 4K / 32K / 128K 463 / 420 / 321 tok/s against 460 / 389 /
	// 259 without, on an H100 (2026-12-06-kvshadow1), the oracle's figures
	// unchanged (-oracleks1); it costs half the cache's memory again.
	KVShadow bool
	// Pool (pool=on, the default) takes the state's buffers, the KV
	// caches' shadows and the programs' scratch from the device's memory
	// pool in the backend stream's order (cuMemAllocAsync): freed memory,
	// up to poolReserve, stays mapped for the next allocation, a free needs
	// no wait for the GPU, and poolReserve bytes are mapped once the
	// weights are in (a GPU without memory pools takes pool=off). Off,
	// each is cuMemAlloc'd and cuMemFree'd, which a prompt length's first
	// Prepare spent most of its 6.5-10.5 ms blocked in (2026-12-07-prep1).
	// On an H100 (2026-12-07-pool1, two rounds) a length's first Prepare
	// 2.8-4.3 against 7.7-8.9 ms at 4K tokens, 2.6-4.2 against 6.0-6.8 at
	// 1K, its first run 104.5-105.9 against 109.4-110.5 ms and 38.8-40.2
	// against 42.1-42.7; later runs and decode the same (measured keeping
	// all freed memory; the bound of poolReserve came after, not yet run).
	Pool bool
	// KVCopy gives prefill's flash attention over a float32 KV cache a bf16
	// copy of the rows it reads, made once a chunk (kv_to_bf16), so that
	// its bf16 kernels run instead of the float32 ones, which round every
	// tile in every block that reads it: the same outputs bit for bit.
	KVCopy bool
	// SyncEach waits after every op, so that an error of the GPU names the
	// op that caused it (slow; programs are then not captured as graphs).
	SyncEach bool
	// Verbose prints a line per compiled program (ops, kernels, graph) to
	// standard error.
	Verbose bool
	// Notice, where set, is told what a user waiting on New should know:
	// that the driver is about to compile petal's kernels for this GPU
	// (its cache cold or off), and how long loading them took when that
	// was slow (kernelcache.go). Not an option of the spec.
	Notice func(string)
}

// pdlGainers are the steps pdl=some launches early (by the start of their
// names): the kernels whose share of a decoded token shrank under pdl=on
// (pdlpre1, docs/bench/cuda), the first projections with their norm and the
// experts' gate/up.
var pdlGainers = []string{"qmv_group_norm", "moe_gate_up"}

// RouterKernel chooses the kernel of prefill's router logits.
type RouterKernel int

const (
	RouterF64 RouterKernel = iota
	RouterPlain
	// RouterI8 is route_i8.cu's qgemm_i8: the integer tensor cores on x in
	// four 8-bit parts a group of 64 columns, exact int32 products, float64
	// sums (as exact as qgemm_f64): at 4096 rows 142 against qgemm_f64_h's
	// 173 µs in one run on an H100, 126-128 in its second form; prefill 1-3
	// % faster against router=f64 in the same runs (2026-12-06-deltacl1,
	// -routeri8).
	RouterI8
	// RouterI8W (router=i8w) is qgemm_i8 in blocks of 32 tokens x 256
	// rows, 16 warps (route_i8w.cu's qgemm_i8_w): x split once for every
	// expert. RouterI8WG (router=i8wg, the default) is that shape with two
	// groups of 64 columns a stage of copies, one pair of barriers for
	// both: at 4096 rows 115 µs against qgemm_i8_w's 117 and qgemm_i8's
	// 128 on an H100, prefill at 4K and 16K 0.3-1 % faster than router=i8
	// in three alternating rounds (2026-12-07-router7, -stout2). The same
	// bits as qgemm_i8 (TestRouterShapesMatchI8).
	RouterI8W
	RouterI8WG
	// RouterCert (router=cert) is route_cert.cu's: qgemm_i8_wg2's blocks
	// with x in two 8-bit parts (approximate logits, each within a bound
	// of its exact value), then a warp a token that gives qgemm_i8's exact
	// logit only to the experts the bounds leave in reach of the top-k
	// (about k of 256 at the 35B model's router), and chooses among them as
	// route_select: qgemm_i8's experts in its order, the weights its
	// softmax over the chosen from the same logits (TestRouterCertMatchesI8).
	// For routers that renormalise their weights over the chosen, groups of
	// 64 and at most 1024 experts; router=i8wg elsewhere. Not yet measured.
	RouterCert
)

// integer says whether k is qgemm_i8 in one of its shapes (qiShapes).
func (k RouterKernel) integer() bool {
	_, ok := qiShapes[k]
	return ok
}

// routerValues are router='s values, in the order its error names them.
var routerValues = []struct {
	name string
	k    RouterKernel
}{{"i8", RouterI8}, {"i8w", RouterI8W}, {"i8wg", RouterI8WG}, {"cert", RouterCert},
	{"f64", RouterF64}, {"plain", RouterPlain}}

// parseRouter is router=value's kernel.
func parseRouter(value string) (RouterKernel, error) {
	if value == "i8t" || value == "i8n" || value == "i8g" {
		return 0, fmt.Errorf("cuda: router=%s was removed after measurement: no faster than router=i8 on an H100, "+
			"router=i8wg (the default) and i8w 8-10 %% faster (docs/bench/cuda, router7)", value)
	}
	names := make([]string, len(routerValues))
	for i, v := range routerValues {
		if v.name == value {
			return v.k, nil
		}
		names[i] = v.name
	}
	return 0, fmt.Errorf("cuda: router=%q: want %s or %s", value, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// MoEKernel chooses the kernel of prefill's grouped MoE GEMMs at a few rows
// an expert (the value of moe=).
type MoEKernel string

const (
	MoESmem   MoEKernel = "smem"
	MoEReg    MoEKernel = "reg"
	MoEStream MoEKernel = "stream"
	// MoEWG takes gemm_wg.cu's register-A tile w32r from 5 to 16 rows an
	// expert on average under gemm=wgr or wgrp (elsewhere, stream): 308 us
	// at 512 tokens against s16's 365 on an H100 (2026-12-06-pipe2), 320
	// and 339 against 365 with the routing skewed (host1).
	MoEWG MoEKernel = "wg"
)

// kvShadowed says whether o keeps a bf16 shadow of the KV caches: kvshadow=on
// over float32 caches (a bf16 cache is read as it is).
func (o Options) kvShadowed() bool { return o.KVShadow && o.KV == backend.F32 }

// DefaultOptions are the settings of "--backend cuda".
func DefaultOptions() Options {
	return Options{Graphs: true, Fused: true, TensorCores: true, WGMMA: true, WGRegA: true, FlashAttention: true, ChunkedDelta: true, DeltaTF32: true, DeltaFrag: true, PDL: true, PDLSome: false, Router: RouterI8WG, GDNCluster: true, MoEFit: true, MoEFitWidth: true, FusedNorms: true, KV: backend.F32, MoE: MoEWG, GroupGEMM: true, FlashWide: true, FlashWG: true, FlashWGPipe: true, WGUndrained: true, SplitK: true, SplitKGroups: true, KVCopy: true, KVShadow: true, SamplerTopK: true, Pool: true, MoEGroupBlocks: true, NormBF16: true, NormBF16MoE: true, NormF32Lean: true, MoEYsBF16: true, QKRowsWarp: true, DeltaPair: true}
}

// OptionsHelp lists the options of "--backend cuda:KEY=VALUE,...".
const OptionsHelp = `device=N (the GPU, from 0; default 0), ` +
	`graphs=on|off (replay each decode step and prompt chunk of up to 16 tokens as a CUDA graph; longer chunks run their kernels one by one either way, as fast as a replay; default on), ` +
	`fused=on|off (the decode kernels for one-token ops; default on), ` +
	`router=i8|i8w|i8wg|cert|f64|plain (prefill's router logits: exact integer products of x in four 8-bit parts on the tensor cores with float64 sums, as exact as f64: i8wg in blocks of 32 tokens by all 256 experts with two groups of columns a stage, 115 µs at 4096 rows on an H100 against i8w's (one group a stage) 117, i8's (32 by 128) 128 and f64's 173, the same bits; cert, x in two parts for logits within a bound of the exact ones, the exact logit only for the experts the bounds leave in reach of the top-k: the same experts, not yet measured; float64 on the tensor cores; or the float32 kernels; default i8wg), ` +
	`norms=fused|apart (the norms of one token inside the kernels of the router and of the first projections; default fused), ` +
	`sampler=row|topk (a sampled token's choice: one block's radix selections over the whole row, or with a top-k of 1 to 64 the k best of 128 blocks' k best, the same choice; topk made decode with the model's defaults 39 % faster than row on an H100; default topk), ` +
	`gdnnorm=cluster|ticket (a decoded token's gated norm in the Gated DeltaNet step: every block through a thread-block cluster, or the last of a value head's blocks, by a ticket; cluster 0.3-0.6 % faster decode on an H100; default cluster), ` +
	`moelayer=one|three (the MoE block of one token, its norm, router and experts, in one launch with grid-wide barriers, or three launches; default three), ` +
	`pdl=off|on|some (programmatic dependent launch: each kernel launched while the one before runs, waiting for it inside; some: only the first projections and the experts' gate/up, which gained from it when every kernel let the next launch at its start; default on), ` +
	`gemm=wgrp|wgrs|wgr3|wgr|wg|tc|plain (prefill's projections and experts on the tensor cores with bf16 inputs, or the float32 kernels; wgr: the larger tiles on Hopper's wgmma (compute capability 9.0; elsewhere as tc), each thread dequantising its own weights as wgmma's register operand; wgrp: wgr's tiles with their k-tiles not drained between barriers, prefill of 4K-16K tokens 1-2 % faster than wgr,attn=wg on an H100 in two alternating rounds; wgrs: wgrp with the dense 256-row tiles' copies issued by a warp of their own, the stages handed over by mbarriers, 273-287 TFLOP/s at 4096 rows against wgrp's 489-549 on an H100; wgr3: wgrp with the dense 256-row tiles three warpgroups of weight rows deep, 192 a block, no faster than wgrp; wg: the tiles with the weights through shared memory, about 1 % slower than wgr; tc: mma.sync tiles only, 14-17 % slower than wg; default wgrp), ` +
	`moefit=on|all|width|off (prefill's MoE tiles sized to the rows an expert gets under gemm=wgrp: on, 160 rows a tile from 97 to 144 on average (4K tokens), so that most experts take one tile, not one and a nearly empty second, the MoE of 4096 tokens 13 % faster on an H100; all, 80 rows from 57 to 72 too (2K tokens), not faster in prefill there; width, on's 160-row tiles with each tile's products only as wide as its live rows, the MoE of 4096 tokens 2 % faster, prefill of 4K tokens 2-2.5 % faster on an H100; default width), ` +
	`moeys=f32|bf16 (prefill's expert outputs between the MoE's down GEMM and the sum over a token's experts: float32, or each rounded to bf16, half the bytes written and read back, the sums float32; register-A tiles under moe=wg only; prefill 1-2.5 % faster; default bf16), ` +
	`moegroup=one|blocks (prefill's grouping of the (token, slot) pairs by expert: one block, or counted and placed by many blocks in three kernels, prefill of 4K and 16K tokens 1-2 % faster; default blocks), ` +
	`deltaflow=on|pair|off (under delta=tf32frag, the delta rule's prep and state pass at once: the prep's blocks raise a flag a value head and block of tokens as they write its workspace, the state pass, launched beside them under pdl=on, fetches each block once its flag is up; the same bits; the delta rule at 4096 tokens 561 against 577 µs on an H100, the prep then the limit; pair: with deltapair's prep, two value heads of a key head a block, not yet measured; default off), ` +
	`deltapair=on|off (under delta=tf32frag without deltaflow, the delta rule's prep a block for two value heads of one key head, their queries and keys normalised and their q·k and k·k taken once; the same bits; prefill of 4K-16K tokens 0.5-1.3 % faster on an H100; default on; off under deltaflow or another delta), ` +
	`convgemm=on|off (a prompt chunk's Gated DeltaNet conv in the epilogue of the in_proj GEMM: the raw projection neither written but for a few rows nor read back; the same bits; not yet measured; default off), ` +
	`sharedside=on|off (a prompt chunk's shared expert on a second stream beside the router and the routed experts, joined by the combine; the same bits; not under combinenorm; not yet measured; default off), ` +
	`combinenorm=on|off (a prompt chunk's MoE combine summed inside the next layer's input norm where only that norm reads the MoE's output, not written and read back; the same bits; prefill of 4K and 16K tokens within 0.8 % of off on an H100; default off), ` +
	`qkrows=warp|block (a prompt chunk's query and key norms, RoPE and cache rows: a warp a row over every head, or a block of 256 threads a head and row; the same bits; warp: prefill of 4K tokens 1.4-1.6 % faster on an H100; default warp), ` +
	`normf32=lean|full (under normbf, a norm's float32 output left unwritten where the program writes over it before any op but the GEMM after it, which reads the bf16 copy, reads it; the same bits; prefill of 4K tokens 0.7-1.9 % faster on an H100; default lean), ` +
	`normbf=on|moe|off (a prompt chunk's input norm and gated norm also write the bf16 copy of their output that the next tensor-core GEMM reads, in place of a conversion; the same bits; prefill 0.2-2.4 % faster; moe, the post-attention norm too, for the MoE's GEMMs, with normf32=lean prefill of 4K tokens 1.5-2.4 % faster than neither on an H100; default moe), ` +
	`moe=smem|reg|stream|wg (prefill's MoE GEMMs at up to 16 rows an expert: through a bf16 weight tile in shared memory, dequantised in registers, or each warp streaming its own weight rows: stream took 7-14 % less time than smem at 512 tokens on an H100, with tokens routed evenly and skewed as a trained router's; wg: under gemm=wgr or wgrp the register-A wgmma tile of 32 rows (elsewhere as stream), the MoE at 512 tokens 7-16 % faster than stream's with tokens routed evenly and skewed, prefill of 512 tokens 1-3 %; default wg), ` +
	`linears=group|apart (prefill's dense GEMMs of matrices that read one input, in one launch or one a matrix; default group), ` +
	`splitk=on|off|all (prefill's dense GEMMs at a few rows with their columns split over more blocks, partials added in order; all: a matrix group's grouped launch too; on: single matrices only; default all), ` +
	`attn=wgp|wgo|wg|wide|flash|plain (prefill's attention on the tensor cores, bf16 operands: flash, 64 query rows a block; wide, 128 and the next key tile loading while one is used; wg, wide's blocks with the products on Hopper's wgmma (compute capability 9.0, heads of 256; elsewhere as wide), 1.7x wide's throughput at long context, prefill of 128K tokens 33 % faster on an H100; wgp, wg with each warpgroup's softmax overlapping its products of the tile before, 5-7 % more throughput than wg, prefill of 128K tokens 2.3 % faster; wgo, wgp's arithmetic with its products kept pipelined by ptxas (wgp's machine code waits for each product on its own), not yet measured; or the float32 kernel; default wgp), ` +
	`qmv=exact|fast (the 4-bit mat-vec with float32's error, or x in two int8 parts; default exact), ` +
	`delta=tf32|tf32frag|chunked|sequential (prefill's delta rule in blocks of 32 tokens on the tensor cores, its state float32 and its products one tf32 product a pair of operands (about 2^-11 relative, below the 2^-9 of its bf16-rounded inputs); chunked, the same with three tf32 products a pair, as accurate as float32's, prefill of 4K and 16K tokens 4 % slower; tf32frag, tf32 with its workspace in the tensor cores' fragment order, the same bits, its delta rule 4 % faster at 4K tokens; or token by token; default tf32frag), ` +
	`kv=f32|bf16 (element type of the KV cache; default f32), ` +
	`kvshadow=on|off (a bf16 copy of an f32 KV cache kept beside it, which decode's attention and prefill's flash attention read: half the bytes a decoded token reads from the cache, the f32 cache still the saved state, half its memory again; decode at 32K / 128K 8 / 24 % faster on an H100, the oracle's figures unchanged; default on), ` +
	`pool=on|off (the state's buffers, the caches' shadows and the scratch from the device's memory pool in stream order, up to 2 GiB of freed memory kept mapped and 2 GiB mapped once the weights are in, so that a new prompt length's first run waits on no allocation; off, each allocated and freed by the driver as asked; default on), ` +
	`kvcopy=on|off (prefill's flash attention over an f32 KV cache reads a bf16 copy of it made once a chunk, the same outputs as rounding each tile as it is read; default on), ` +
	`sync=run|op (op: wait after every op so that a GPU error names it; slow; default run), ` +
	`verbose=on|off (a line per compiled program on stderr: its ops, kernels and the host's milliseconds lowering it and allocating its memory; default off)`

// ParseOptions reads the options of a backend Spec named cuda.
func ParseOptions(opts []backend.Option) (Options, error) {
	o := DefaultOptions()
	pairNamed := false // deltapair named: on where it cannot run is an error, not a quiet off
	for _, kv := range opts {
		var err error
		var first bool // for the options whose field is the second of its choice
		switch kv.Key {
		case "device":
			n, e := strconv.Atoi(kv.Value)
			if e != nil || n < 0 {
				return Options{}, fmt.Errorf("cuda: device=%q: want a GPU number from 0", kv.Value)
			}
			o.Device = n
		case "graphs":
			o.Graphs, err = kv.On("cuda")
		case "fused":
			o.Fused, err = kv.On("cuda")
		case "pdl":
			switch kv.Value {
			case "on":
				o.PDL, o.PDLSome = true, false
			case "off":
				o.PDL, o.PDLSome = false, false
			case "some":
				o.PDL, o.PDLSome = true, true
			default:
				err = fmt.Errorf("cuda: pdl=%q: want off, on or some", kv.Value)
			}
		case "verbose":
			o.Verbose, err = kv.On("cuda")
		case "router":
			var k RouterKernel
			if k, err = parseRouter(kv.Value); err == nil {
				o.Router = k
			}
		case "norms":
			o.FusedNorms, err = kv.Is("cuda", "fused", "apart")
		case "sampler":
			o.SamplerTopK, err = kv.Is("cuda", "topk", "row")
		case "gdnnorm":
			o.GDNCluster, err = kv.Is("cuda", "cluster", "ticket")
		case "routenorm":
			// ticket, the only form left, is still taken so that older
			// command lines run; cluster says why it went
			switch kv.Value {
			case "ticket":
			case "cluster":
				err = fmt.Errorf("cuda: routenorm=cluster was removed after measurement: decode about 4 %% slower " +
					"than the ticket form at 4K and 32K on an H100 (docs/bench/cuda/2026-12-07-fw4)")
			default:
				err = fmt.Errorf("cuda: routenorm=%q: want ticket", kv.Value)
			}
		case "moelayer":
			o.MoELayer, err = kv.Is("cuda", "one", "three")
		case "qmv":
			first, err = kv.Is("cuda", "exact", "fast")
			o.FastQMV = !first
		case "gemm":
			switch kv.Value {
			case "wg", "wgr", "wgrp", "wgrs", "wgr3", "tc":
				undrained := kv.Value == "wgrp" || kv.Value == "wgrs" || kv.Value == "wgr3"
				o.TensorCores, o.WGMMA = true, kv.Value != "tc"
				o.WGRegA, o.WGUndrained = kv.Value == "wgr" || undrained, undrained
				o.WGProducer, o.WGThree = kv.Value == "wgrs", kv.Value == "wgr3"
			case "plain":
				o.TensorCores, o.WGMMA, o.WGRegA, o.WGUndrained, o.WGProducer, o.WGThree = false, false, false, false, false, false
			default:
				err = fmt.Errorf("cuda: gemm=%q: want wgrp, wgrs, wgr3, wgr, wg, tc or plain", kv.Value)
			}
		case "moe":
			switch k := MoEKernel(kv.Value); k {
			case MoESmem, MoEReg, MoEStream, MoEWG:
				o.MoE = k
			default:
				err = fmt.Errorf("cuda: moe=%q: want smem, reg, stream or wg", kv.Value)
			}
		case "moefit":
			switch kv.Value {
			case "on", "all", "width", "off":
				o.MoEFit, o.MoEFitAll = kv.Value != "off", kv.Value == "all"
				o.MoEFitWidth = kv.Value == "width"
			default:
				err = fmt.Errorf("cuda: moefit=%q: want on, all, width or off", kv.Value)
			}
		case "moeys":
			o.MoEYsBF16, err = kv.Is("cuda", "bf16", "f32")
		case "moegroup":
			o.MoEGroupBlocks, err = kv.Is("cuda", "blocks", "one")
		case "attnprep":
			// off, the only form left, is still taken so that older command
			// lines run; on says why it went
			if kv.Value == "on" {
				err = fmt.Errorf("cuda: attnprep=on was removed after measurement: decode no faster on an H100 " +
					"(-0.8 / -0.7 / +0.3 %% at 512 / 4K / 16K) and its queries an ulp off qk_prep's (docs/bench/cuda/2026-12-07-report21)")
			} else if on, e := kv.On("cuda"); e != nil || on {
				err = fmt.Errorf("cuda: attnprep=%q: want off", kv.Value)
			}
		case "normf32":
			o.NormF32Lean, err = kv.Is("cuda", "lean", "full")
		case "deltaflow":
			if o.DeltaFlowPair = kv.Value == "pair"; o.DeltaFlowPair {
				o.DeltaFlow = true
			} else if o.DeltaFlow, err = kv.On("cuda"); err != nil {
				err = fmt.Errorf("cuda: deltaflow=%q: want on, pair or off", kv.Value)
			}
		case "sharedside":
			o.SharedSide, err = kv.On("cuda")
		case "convgemm":
			o.ConvGEMM, err = kv.On("cuda")
		case "deltapair":
			o.DeltaPair, err = kv.On("cuda")
			pairNamed = true
		case "combinenorm":
			o.CombineNorm, err = kv.On("cuda")
		case "qkrows":
			o.QKRowsWarp, err = kv.Is("cuda", "warp", "block")
		case "normbf":
			if kv.Value == "moe" {
				o.NormBF16, o.NormBF16MoE = true, true
			} else if o.NormBF16, err = kv.On("cuda"); err == nil {
				o.NormBF16MoE = false
			} else {
				err = fmt.Errorf("cuda: normbf=%q: want on, moe or off", kv.Value)
			}
		case "delta":
			switch kv.Value {
			case "chunked", "tf32", "tf32frag", "sequential":
				o.ChunkedDelta, o.DeltaTF32 = kv.Value != "sequential", kv.Value == "tf32" || kv.Value == "tf32frag"
				o.DeltaFrag = kv.Value == "tf32frag"
			default:
				err = fmt.Errorf("cuda: delta=%q: want tf32, tf32frag, chunked or sequential", kv.Value)
			}
		case "linears":
			o.GroupGEMM, err = kv.Is("cuda", "group", "apart")
		case "splitk":
			switch kv.Value {
			case "on", "off":
				o.SplitK, o.SplitKGroups = kv.Value == "on", false
			case "all":
				o.SplitK, o.SplitKGroups = true, true
			default:
				err = fmt.Errorf("cuda: splitk=%q: want on, off or all", kv.Value)
			}
		case "attn":
			switch kv.Value {
			case "flash", "wide", "wg", "wgp", "wgo":
				o.FlashAttention, o.FlashWide = true, kv.Value != "flash"
				o.FlashWG = kv.Value == "wg" || kv.Value == "wgp" || kv.Value == "wgo"
				o.FlashWGPipe, o.FlashWGOver = kv.Value == "wgp" || kv.Value == "wgo", kv.Value == "wgo"
			case "plain":
				o.FlashAttention, o.FlashWide, o.FlashWG, o.FlashWGPipe, o.FlashWGOver = false, false, false, false, false
			default:
				err = fmt.Errorf("cuda: attn=%q: want wgp, wgo, wg, wide, flash or plain", kv.Value)
			}
		case "kv":
			o.KV, err = kv.KVType("cuda")
		case "kvshadow":
			o.KVShadow, err = kv.Is("cuda", "on", "off")
		case "pool":
			o.Pool, err = kv.On("cuda")
		case "kvcopy":
			o.KVCopy, err = kv.On("cuda")
		case "sync":
			first, err = kv.Is("cuda", "run", "op")
			o.SyncEach = !first
		default:
			return Options{}, fmt.Errorf("cuda: unknown option %q (the options are %s)", kv.Key, OptionsHelp)
		}
		if err != nil {
			return Options{}, err
		}
	}
	if o.DeltaFlow && (!o.ChunkedDelta || !o.DeltaFrag) {
		return Options{}, fmt.Errorf("cuda: deltaflow=on takes delta=tf32frag (its state pass reads tf32frag's workspace)")
	}
	if o.DeltaPair && (!o.ChunkedDelta || !o.DeltaFrag || o.DeltaFlow) {
		if !pairNamed { // the default, where the prep it replaces is not the one run
			o.DeltaPair = false
		} else {
			return Options{}, fmt.Errorf("cuda: deltapair=on takes delta=tf32frag with deltaflow=off (its prep writes tf32frag's workspace, and deltaflow has a prep of its own)")
		}
	}
	return o, nil
}
