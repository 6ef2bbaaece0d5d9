package cuda

import (
	"fmt"
	"maps"
	"slices"

	"petal/engine/cuda/driver"
)

// GEMMTile is one compiled tile shape of gemm.cu: BM rows (tokens) by BN
// weight rows per block, Threads per block, Stages of cp.async buffering.
// A tile with Reg is one of the grouped MoE GEMMs at a few rows an expert
// (gemm_rq: B fragments dequantised in registers, no dense kernel), whose
// blocks take the tile map's items in turn: Blocks of them fit a
// multiprocessor, and the grid is as many as fit the GPU.
//
// A tile with Stream is gemm_stream's: its items are taken as a Reg tile's,
// and it stages its X rows for all of K, so its shared memory depends on K
// (sharedK).
//
// A tile with WG is gemm_wg.cu's: gemm_tile with its products on wgmma
// (sm_90a), loaded only on a GPU of compute capability 9.0 (AddWGMMA),
// with two W tiles: the next k-tile dequantised while this one's products
// run (WG = 2).
//
// A WG tile with RegA is the register-A form (WG = 3, and 4 for its
// undrained twin): the weights dequantised into wgmma's A
// fragments in registers, X the B operand from shared memory, no W tile.
//
// A tile with Producer (gemm_ws.cu's w256rs) has a warp of its own issuing
// the copies, its stages handed over by mbarriers (two a stage after them
// in shared memory), and no block-wide barrier in its loop.
//
// A tile with DenseOnly (gemm_ws.cu's) has dense and grouped dense kernels
// only: the MoE does not take it.
type GEMMTile struct {
	Name                    string
	BM, BN, Threads, Stages int
	Reg, Stream, WG, RegA   bool
	Blocks                  int
	Producer, DenseOnly     bool
}

// GEMMTiles are the tile shapes compiled in gemm.cu (GEMM_ENTRIES).
var GEMMTiles = []GEMMTile{
	{Name: "m128", BM: 128, BN: 128, Threads: 128, Stages: 3},
	{Name: "m128w8", BM: 128, BN: 128, Threads: 256, Stages: 3},
	{Name: "m64", BM: 64, BN: 128, Threads: 128, Stages: 3},
	{Name: "m32", BM: 32, BN: 128, Threads: 128, Stages: 4},
	{Name: "m16", BM: 16, BN: 128, Threads: 128, Stages: 4},
}

// WGMMATiles are gemm_wg.cu's tiles (GEMM_ENTRIES with WG = 2 to 5). On a
// GPU of compute capability 9.0, DenseTile and MoETile choose w256r, w128r
// and w64r (gemm=wgr: the weights as wgmma's A operand from registers, no
// W tile in shared memory, against 64, 128 or 256 X rows; their undrained
// twins under gemm=wgrp, the default), or with gemm=wg w256o, w128o2 and
// w64o (GEMM.UseWGMMA). On an H100 at
// 4096 rows (2026-12-06-wgr1): w256r 425-462 TFLOP/s, w256o 394-444,
// m128 276-291; the MoE at 4096 tokens w128r 927 µs, w128o2 975, at 1024
// w64r 407, w64o 450. Blocks is the blocks a multiprocessor the tile is
// built for (GEMM_ENTRIES' MINB).
var WGMMATiles = []GEMMTile{
	{Name: "w64o", BM: 64, BN: 128, Threads: 128, Stages: 3, WG: true, Blocks: 3},
	{Name: "w128o2", BM: 128, BN: 128, Threads: 256, Stages: 3, WG: true, Blocks: 2},
	{Name: "w256o", BM: 256, BN: 128, Threads: 256, Stages: 3, WG: true, Blocks: 1},
	{Name: "w128r", BM: 128, BN: 128, Threads: 256, Stages: 3, WG: true, RegA: true, Blocks: 2},
	{Name: "w256r", BM: 256, BN: 128, Threads: 256, Stages: 3, WG: true, RegA: true, Blocks: 1},
	{Name: "w64r", BM: 64, BN: 128, Threads: 256, Stages: 3, WG: true, RegA: true, Blocks: 3},
	// w256rp, w128rp, w64rp: the same with their k-tiles not drained (the
	// copies S - 2 k-tiles ahead, gemm_tile's WG = 4), five stages; taken by
	// gemm=wgrp, the default: dense at 4096 rows 3-5 % faster than w256r
	// on an H100 (2026-12-06-pipe2).
	{Name: "w256rp", BM: 256, BN: 128, Threads: 256, Stages: 5, WG: true, RegA: true, Blocks: 1},
	{Name: "w128rp", BM: 128, BN: 128, Threads: 256, Stages: 5, WG: true, RegA: true, Blocks: 2},
	{Name: "w64rp", BM: 64, BN: 128, Threads: 256, Stages: 5, WG: true, RegA: true, Blocks: 3},
	// w32r: the register-A form against 32 X rows, WG = 4 with five
	// stages, for the MoE at a few rows an expert (moe=wg): 308 us at 512
	// tokens against s16's 365 on an H100 (2026-12-06-pipe2).
	{Name: "w32r", BM: 32, BN: 128, Threads: 256, Stages: 5, WG: true, RegA: true, Blocks: 3},
}

// FitTiles are gemm_fit.cu's tiles: w128rp's form against 80 and 160 X
// rows, for the MoE where experts get 57-72 and 97-144 rows on average
// (moefit=on): most experts' rows in one tile, not one and a nearly empty
// second. A module of their own (LoadGEMMFitModule, AddFitTiles).
var FitTiles = []GEMMTile{
	{Name: "w80rp", BM: 80, BN: 128, Threads: 256, Stages: 5, WG: true, RegA: true, Blocks: 2},
	{Name: "w160rp", BM: 160, BN: 128, Threads: 256, Stages: 4, WG: true, RegA: true, Blocks: 2},
}

// WidthTiles are gemm_fitw.cu's: w160rw, w160rp with each MoE tile's
// products as wide as its live rows (64, 96, 112, 128, 144 or 160, chosen
// once a block), taken in w160rp's place under moefit=width. A module of
// its own (LoadGEMMFitWModule, AddWidthTiles).
var WidthTiles = []GEMMTile{
	{Name: "w160rw", BM: 160, BN: 128, Threads: 256, Stages: 4, WG: true, RegA: true, Blocks: 2},
}

// DenseOnlyTiles are gemm_ws.cu's, w256rp's dense GEMM in two other
// forms, each taken in w256rp's place by DenseIn256 (a module of its own:
// LoadGEMMWSModule, AddDenseOnlyTiles):
//   - w256rs (gemm=wgrs): a ninth warp issuing the copies (Producer);
//   - w256r3 (gemm=wgr3): three warpgroups of 64 weight rows, 192 a block,
//     against the 256 X rows (384 threads, one block a multiprocessor).
var DenseOnlyTiles = []GEMMTile{
	{Name: "w256rs", BM: 256, BN: 128, Threads: 288, Stages: 5, WG: true, RegA: true, Blocks: 1, Producer: true, DenseOnly: true},
	{Name: "w256r3", BM: 256, BN: 192, Threads: 384, Stages: 5, WG: true, RegA: true, Blocks: 1, DenseOnly: true},
}

// MoERegTiles are gemm.cu's grouped MoE GEMMs at a few rows an expert
// (RQ_ENTRIES): 16 or 32 rows a tile, 4 warps, RQ_STAGES stages.
var MoERegTiles = []GEMMTile{
	{Name: "r16", BM: 16, BN: rqOutputs, Threads: 128, Stages: 3, Reg: true, Blocks: 4},
	{Name: "r32", BM: 32, BN: rqOutputs, Threads: 128, Stages: 3, Reg: true, Blocks: 3},
}

// rqOutputs is the weight rows of a block item of gemm_rq (RQ_WARPS warps
// of RQ_NT n8 tiles: the down GEMM's outputs, or gate/up's half as many);
// a stage holds their codes and scale/bias words of RQ_KG groups
// (rqStageWeights bytes) and the tile's X rows of rqXRow bytes (RQ_XROW).
const (
	rqOutputs      = 4 * 4 * 8
	rqStageWeights = rqOutputs * 2 * (32 + 4)
	rqXRow         = 2*128 + 16
)

// MoEStreamTiles are gemm.cu's streamed grouped MoE GEMMs (STREAM_ENTRIES):
// BM rows a tile (16, or 32 for s32: each weight dequantised once for 32
// rows, an expert of 17-32 rows read once), one block a multiprocessor of
// Threads/32 warps, each warp BN/8 n8 tiles a pass through a ring of Stages
// steps. s16 is moe=stream's; the others are variants measured beside it
// (s32 slower than s16 under skewed routing: docs/bench/cuda, pipe1).
var MoEStreamTiles = []GEMMTile{
	{Name: "s16", BM: 16, BN: 4 * 8, Threads: 16 * 32, Stages: 3, Reg: true, Stream: true, Blocks: 1},
	{Name: "s16r4", BM: 16, BN: 4 * 8, Threads: 16 * 32, Stages: 4, Reg: true, Stream: true, Blocks: 1},
	{Name: "s16n8", BM: 16, BN: 8 * 8, Threads: 16 * 32, Stages: 2, Reg: true, Stream: true, Blocks: 1},
	{Name: "s32", BM: 32, BN: 4 * 8, Threads: 8 * 32, Stages: 4, Reg: true, Stream: true, Blocks: 1},
}

// stDownPasses is ST_DOWN_PASSES: the passes of a warp over an item of the
// down GEMM.
const stDownPasses = 2

// itemOutputs is the outputs of a block item of a Reg or Stream tile, for
// gate/up (its weight rows half gate, half up) or down: gemm_rq's BN weight
// rows, or gemm_stream's warps of BN/8 n8 tiles (down: stDownPasses passes).
func (t GEMMTile) itemOutputs(gateUp bool) int {
	n := t.BN
	if t.Stream {
		n = t.Threads / 32 * t.BN
		if !gateUp {
			n *= stDownPasses
		}
	}
	if gateUp {
		n /= 2
	}
	return n
}

// allGEMMTiles is GEMMTiles, MoERegTiles and MoEStreamTiles.
func allGEMMTiles() []GEMMTile { return slices.Concat(GEMMTiles, MoERegTiles, MoEStreamTiles) }

// GEMMTileByName finds a tile shape of GEMMTiles, MoERegTiles,
// MoEStreamTiles or WGMMATiles.
// (Lowering asks for tiles by name many times a program: the lists are
// walked in place, nothing allocated.)
func GEMMTileByName(name string) (GEMMTile, error) {
	for _, tiles := range [...][]GEMMTile{GEMMTiles, MoERegTiles, MoEStreamTiles, WGMMATiles, FitTiles, WidthTiles, DenseOnlyTiles} {
		for _, t := range tiles {
			if t.Name == name {
				return t, nil
			}
		}
	}
	return GEMMTile{}, fmt.Errorf("cuda: no GEMM tile %q", name)
}

func (t GEMMTile) String() string { return t.Name }

// shared is GEMM_SHARED: the stages' X tiles, codes and scale/bias words,
// and the dequantised bf16 W tile; for a Reg tile RQ_SHARED, its stages;
// for a Stream tile, its rings and X rows at K = 2048 (sharedK).
func (t GEMMTile) shared() int { return t.sharedK(2048) }

// sharedK is the dynamic shared memory of tile t at K columns: for a Stream
// tile ST_RINGS + 32·K, for the others their fixed GEMM_SHARED or RQ_SHARED.
func (t GEMMTile) sharedK(K int) int {
	if t.Stream { // the warps' rings (a step: 20 bytes a lane and n-tile) and the X rows
		return t.Threads/32*t.Stages*(t.BN/8)*32*20 + t.BM*2*K
	}
	if t.Reg {
		return t.Stages * (rqStageWeights + t.BM*rqXRow)
	}
	if t.WG { // stages 1024-byte aligned, the wgmma swizzle's period
		stages := t.Stages * ((t.BM*128 + t.BN*36 + 1023) / 1024 * 1024)
		if t.Producer { // a full and an empty mbarrier a stage
			return stages + 16*t.Stages
		}
		if t.RegA {
			return stages
		}
		return stages + 2*t.BN*128 // two W tiles
	}
	return t.Stages*(t.BM*128+t.BN*36) + t.BN*128
}

// LoadGEMMModule loads the gemm kernels embedded in the binary.
func LoadGEMMModule(c *driver.Context) (*driver.Module, error) {
	return loadFamily(c, "gemm")
}

// LoadGEMMFitModule loads gemm_fit.cu's kernels (FitTiles; sm_90a PTX).
func LoadGEMMFitModule(c *driver.Context) (*driver.Module, error) {
	return loadWGMMAFamily(c, "gemm_fit")
}

// LoadGEMMWGModule loads gemm_wg.cu's kernels (sm_90a PTX: a GPU of
// compute capability 9.0 only).
func LoadGEMMWGModule(c *driver.Context) (*driver.Module, error) {
	return loadWGMMAFamily(c, "gemm_wg")
}

// loadWGMMAFamily loads family, sm_90a PTX (wgmma): a GPU of compute
// capability 9.0 only.
func loadWGMMAFamily(c *driver.Context, family string) (*driver.Module, error) {
	if d := c.Device(); d.Major != 9 || d.Minor != 0 {
		return nil, fmt.Errorf("cuda: the wgmma GEMMs need compute capability 9.0; %s", d)
	}
	return loadFamily(c, family)
}

// AddWGMMA adds the tiles of WGMMATiles from mod (LoadGEMMWGModule).
func (g *GEMM) AddWGMMA(mod *driver.Module) error { return g.addTiles(mod, WGMMATiles) }

// addTiles finds the entry points of tiles in mod and adds the tiles.
func (g *GEMM) addTiles(mod *driver.Module, tiles []GEMMTile) error {
	for _, t := range tiles {
		k, err := tileKernels(mod, t)
		if err != nil {
			return err
		}
		g.tiles[t.Name] = k
		g.wg = append(g.wg, t)
	}
	return nil
}

// AddFitTiles finds FitTiles' kernels in mod (LoadGEMMFitModule).
func (g *GEMM) AddFitTiles(mod *driver.Module) error { return g.addTiles(mod, FitTiles) }

// LoadGEMMFitWModule loads gemm_fitw.cu's kernels (WidthTiles; sm_90a PTX).
func LoadGEMMFitWModule(c *driver.Context) (*driver.Module, error) {
	return loadWGMMAFamily(c, "gemm_fitw")
}

// AddWidthTiles finds WidthTiles' kernels in mod (LoadGEMMFitWModule),
// their down GEMMs with bf16 outputs among them (DownBF).
func (g *GEMM) AddWidthTiles(mod *driver.Module) error { return g.addTilesBF(mod, WidthTiles) }

// addTilesBF is addTiles with each tile's gemm_downbf_ kernel too.
func (g *GEMM) addTilesBF(mod *driver.Module, tiles []GEMMTile) error {
	if err := g.addTiles(mod, tiles); err != nil {
		return err
	}
	for _, t := range tiles {
		fn, err := mod.Function("gemm_downbf_" + t.Name)
		if err != nil {
			return err
		}
		if g.downBF == nil {
			g.downBF = map[string]*driver.Function{}
		}
		g.downBF[t.Name] = fn
	}
	return nil
}

// LoadGEMMWSModule loads gemm_ws.cu's kernels (DenseOnlyTiles; sm_90a PTX).
func LoadGEMMWSModule(c *driver.Context) (*driver.Module, error) {
	return loadWGMMAFamily(c, "gemm_ws")
}

// AddDenseOnlyTiles finds DenseOnlyTiles' kernels in mod (LoadGEMMWSModule).
func (g *GEMM) AddDenseOnlyTiles(mod *driver.Module) error { return g.addTiles(mod, DenseOnlyTiles) }

// DenseIn256 makes DenseTile take the tile named (w256rs under gemm=wgrs,
// w256r3 under gemm=wgr3) where it would take w256rp, once
// AddDenseOnlyTiles has added it; "" for w256rp itself.
func (g *GEMM) DenseIn256(name string) { g.dense256 = name }

// WidthMoETiles makes MoETile take w160rw where it would take w160rp
// (moefit=width), once AddWidthTiles has added it.
func (g *GEMM) WidthMoETiles(on bool) { g.fitWidth = on }

// DownBFTiles are the tiles of gemm_downbf.cu's down GEMMs with bf16
// expert outputs (moeys=bf16): the register-A tiles the MoE takes under
// moe=wg (MoETile). Another tile writes float32 outputs.
var DownBFTiles = []string{"w32r", "w64r", "w128rp", "w80rp", "w160rp"}

// LoadGEMMDownBFModule loads gemm_downbf.cu's kernels (DownBFTiles and
// moe_combine_bf; sm_90a PTX).
func LoadGEMMDownBFModule(c *driver.Context) (*driver.Module, error) {
	return loadWGMMAFamily(c, "gemm_downbf")
}

// AddDownBF finds gemm_downbf.cu's kernels in mod (LoadGEMMDownBFModule):
// from then on MoEDownBF and MoECombineBF take DownBFTiles.
func (g *GEMM) AddDownBF(mod *driver.Module) error {
	fns := map[string]*driver.Function{}
	for _, name := range DownBFTiles {
		fn, err := mod.Function("gemm_downbf_" + name)
		if err != nil {
			return err
		}
		fns[name] = fn
	}
	combine, err := mod.Function("moe_combine_bf")
	if err != nil {
		return err
	}
	if g.downBF == nil {
		g.downBF = map[string]*driver.Function{}
	}
	maps.Copy(g.downBF, fns) // beside AddWidthTiles' own
	g.combineBF = combine
	return nil
}

// DownBF says whether the down GEMM of tile t can write bf16 expert
// outputs (AddDownBF added its kernel).
func (g *GEMM) DownBF(t GEMMTile) bool { return g.downBF[t.Name] != nil }

// UseWGMMA makes DenseTile and MoETile choose the wgmma tiles (added by
// AddWGMMA) where they were measured faster than the mma.sync tiles; with
// regA, the register-A tiles w256r, w128r and w64r in the places of w256o,
// w128o2 and w64o (gemm=wgr, and gemm=wgrp's with UndrainedTiles).
func (g *GEMM) UseWGMMA(regA bool) error {
	if len(g.wg) == 0 {
		return fmt.Errorf("cuda: the wgmma GEMM tiles are not loaded")
	}
	g.useWG, g.regA = true, regA
	return nil
}

// UndrainedTiles makes DenseTile and MoETile take w256rp, w128rp and w64rp
// in the places of w256r, w128r and w64r (gemm=wgrp): gemm_tile's WG = 4,
// the k-tiles not drained.
func (g *GEMM) UndrainedTiles() { g.undrained = true }

// FitMoETiles makes MoETile, under UndrainedTiles, take w160rp from 97 to
// 144 rows an expert on average (moefit=on) and with all w80rp from 57 to
// 72 (moefit=all), where AddFitTiles added them.
func (g *GEMM) FitMoETiles(on, all bool) { g.fit, g.fitAll = on, on && all }

// undrain is t, or its WG = 4 twin (t's name and "p") under UndrainedTiles.
func (g *GEMM) undrain(t GEMMTile) GEMMTile {
	if !g.undrained || !t.RegA {
		return t
	}
	if p, err := GEMMTileByName(t.Name + "p"); err == nil {
		return p
	}
	return t
}

// tileKernels finds gemm_tile's four entry points of tile t in mod.
func tileKernels(mod *driver.Module, t GEMMTile) (gemmKernels, error) {
	var k gemmKernels
	for _, f := range []struct {
		dst  **driver.Function
		name string
	}{{&k.dense, "gemm_dense_"}, {&k.group, "gemm_group_"}, {&k.gateUp, "gemm_gateup_"}, {&k.down, "gemm_down_"}} {
		if t.DenseOnly && (f.dst == &k.gateUp || f.dst == &k.down) {
			continue
		}
		fn, err := mod.Function(f.name + t.Name)
		if err != nil {
			return gemmKernels{}, err
		}
		*f.dst = fn
	}
	return k, nil
}

// DenseTiles are the tiles of Dense and DenseGroup here: GEMMTiles, and
// WGMMATiles once added.
func (g *GEMM) DenseTiles() []GEMMTile { return slices.Concat(GEMMTiles, g.wg) }

// AllTiles are every tile of the grouped MoE GEMMs here: allGEMMTiles, and
// the sm_90a tiles once added but the DenseOnly ones.
func (g *GEMM) AllTiles() []GEMMTile {
	return slices.Concat(allGEMMTiles(), slices.DeleteFunc(slices.Clone(g.wg), func(t GEMMTile) bool { return t.DenseOnly }))
}

type gemmKernels struct {
	dense, group, gateUp, down *driver.Function
}

// GEMM launches the 4-bit weight GEMMs of prefill on the tensor cores and
// the device-side MoE grouping around them.
type GEMM struct {
	c                       *driver.Context
	tiles                   map[string]gemmKernels
	toBF16, route, combine  *driver.Function
	route8                  *driver.Function // moe_route8 (RouteAhead)
	routeAhead              bool
	sharedSwiGLU, sumSplits *driver.Function
	sharedReady             map[*driver.Function]bool
	wg                      []GEMMTile       // WGMMATiles added (AddWGMMA)
	useWG, regA             bool             // UseWGMMA
	undrained               bool             // UndrainedTiles
	fit, fitAll             bool             // FitMoETiles
	fitWidth                bool             // WidthMoETiles
	dense256                string           // DenseIn256
	groupCount, groupScan   *driver.Function // moe_group.cu's (AddMoEGroup)
	groupPlace              *driver.Function
	routeBlocks             bool                        // RouteBlocks
	downBF                  map[string]*driver.Function // gemm_downbf_<tile> (AddDownBF)
	combineBF               *driver.Function            // moe_combine_bf
}

// NewGEMM finds the kernels in mod (the embedded module or another build of
// gemm.cu).
func NewGEMM(c *driver.Context, mod *driver.Module) (*GEMM, error) {
	g := &GEMM{c: c, tiles: map[string]gemmKernels{}, sharedReady: map[*driver.Function]bool{}}
	for _, t := range GEMMTiles {
		k, err := tileKernels(mod, t)
		if err != nil {
			return nil, err
		}
		g.tiles[t.Name] = k
	}
	for _, t := range slices.Concat(MoERegTiles, MoEStreamTiles) {
		var k gemmKernels
		var err error
		if k.gateUp, err = mod.Function("gemm_gateup_" + t.Name); err != nil {
			return nil, err
		}
		if k.down, err = mod.Function("gemm_down_" + t.Name); err != nil {
			return nil, err
		}
		g.tiles[t.Name] = k
	}
	for _, f := range []struct {
		dst  **driver.Function
		name string
	}{{&g.toBF16, "gemm_to_bf16"}, {&g.route, "moe_route"}, {&g.route8, "moe_route8"}, {&g.combine, "moe_combine"}, {&g.sharedSwiGLU, "moe_shared_swiglu"}, {&g.sumSplits, "gemm_sum_splits"}} {
		fn, err := mod.Function(f.name)
		if err != nil {
			return nil, err
		}
		*f.dst = fn
	}
	g.routeAhead = true
	return g, nil
}

// Function returns the kernel of a tile and kind ("dense", "group",
// "gateup", "down"), for its resource report.
func (g *GEMM) Function(tile GEMMTile, kind string) *driver.Function {
	k := g.tiles[tile.Name]
	switch kind {
	case "dense":
		return k.dense
	case "group":
		return k.group
	case "gateup":
		return k.gateUp
	case "down":
		return k.down
	}
	return nil
}

// launchTile raises fn's shared-memory limit once and launches it, its
// shared memory that of tile t at K columns.
func (g *GEMM) launchTile(s *driver.Stream, fn *driver.Function, t GEMMTile, K int, grid driver.Dim3, a *driver.Args) error {
	if err := g.ready(fn, t); err != nil {
		return err
	}
	shared := t.sharedK(K)
	if max := g.c.Device().SharedOptIn; shared > max {
		return fmt.Errorf("cuda: GEMM tile %s at %d columns needs %d bytes of shared memory; the GPU allows %d", t, K, shared, max)
	}
	return s.Launch(fn, grid, driver.D1(t.Threads), shared, a)
}

// ready raises fn's shared-memory limit to what tile t needs, once: a
// Stream tile's, whose need grows with K, to all the GPU allows.
func (g *GEMM) ready(fn *driver.Function, t GEMMTile) error {
	if g.sharedReady[fn] {
		return nil
	}
	shared, max := t.shared(), g.c.Device().SharedOptIn
	if t.Stream {
		shared = max
	}
	if shared > max {
		return fmt.Errorf("cuda: GEMM tile %s needs %d bytes of shared memory; the GPU allows %d", t, shared, max)
	}
	if err := fn.SetMaxDynamicShared(shared); err != nil {
		return err
	}
	g.sharedReady[fn] = true
	return nil
}

// StreamFits says whether the Stream tile t runs the MoE of hidden columns
// and inter experts' columns on this GPU: K a multiple of 128 and its X
// rows for all of K in shared memory, for both GEMMs.
func (g *GEMM) StreamFits(t GEMMTile, hidden, inter int) bool {
	return g.checkStream(t, hidden, inter) == nil
}

// checkStream is StreamFits as an error naming the shape, nil for a tile
// that is not a Stream tile; and an error for a DenseOnly tile.
func (g *GEMM) checkStream(t GEMMTile, hidden, inter int) error {
	if t.DenseOnly {
		return fmt.Errorf("cuda: GEMM tile %s is for dense GEMMs only, not the MoE's", t)
	}
	max := g.c.Device().SharedOptIn
	if t.Stream && (hidden%128 != 0 || inter%128 != 0 || t.sharedK(hidden) > max || t.sharedK(inter) > max) {
		return fmt.Errorf("cuda: MoE GEMM tile %s does not take %d hidden and %d expert columns (multiples of 128 whose X rows fit shared memory)", t, hidden, inter)
	}
	return nil
}

// Prepare raises every tile's shared-memory limit now, so that no launch
// recorded into a CUDA graph changes a function's attributes.
func (g *GEMM) Prepare() error {
	for _, t := range slices.Concat(allGEMMTiles(), g.wg) {
		for _, kind := range []string{"dense", "group", "gateup", "down"} {
			if t.Reg && (kind == "dense" || kind == "group") || t.DenseOnly && (kind == "gateup" || kind == "down") {
				continue
			}
			if err := g.ready(g.Function(t, kind), t); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkGEMMWeights checks that m is 4-bit in groups of 64 with the
// interleaved scales and biases, with cols columns and rows a multiple of 8.
func checkGEMMWeights(m *QMatrix, what string, rows, cols int) error {
	if m == nil {
		return fmt.Errorf("cuda: GEMM: no %s matrix", what)
	}
	if m.Bits != 4 || m.GroupSize != 64 {
		return fmt.Errorf("cuda: GEMM %s: %d-bit weights in groups of %d are not built (4-bit in groups of 64 only)", what, m.Bits, m.GroupSize)
	}
	if m.ScaleBias == 0 {
		return fmt.Errorf("cuda: GEMM %s: the interleaved scales and biases were not uploaded (QMatrix.UploadScaleBias)", what)
	}
	if m.Rows != rows || m.Cols != cols {
		return fmt.Errorf("cuda: GEMM %s is %d×%d, want %d×%d", what, m.Rows, m.Cols, rows, cols)
	}
	if cols%64 != 0 || rows%8 != 0 {
		return fmt.Errorf("cuda: GEMM %s is %d×%d: rows must be a multiple of 8 and columns of 64", what, rows, cols)
	}
	return nil
}

func aligned16(ps ...driver.Ptr) bool {
	for _, p := range ps {
		if p%16 != 0 {
			return false
		}
	}
	return true
}

// ToBF16 queues y[0:n] = bf16(x[0:n]) (round to nearest even) on s: the
// activations going into the tensor cores. n % 4 == 0; x and y 16-byte
// aligned.
func (g *GEMM) ToBF16(s *driver.Stream, x, y driver.Ptr, n int) error {
	if n%4 != 0 || !aligned16(x, y) {
		return fmt.Errorf("cuda: bf16 conversion of %d elements: want a multiple of 4 and 16-byte aligned buffers", n)
	}
	if n == 0 {
		return nil
	}
	var a driver.Args
	a.Ptr(x).Ptr(y).I64(int64(n))
	return s.Launch(g.toBF16, driver.D1((n/4+255)/256), driver.D1(256), 0, &a)
}

// DenseTile is the tile shape chosen for an M×N output: the largest BM
// whose grid still has a block for about every multiprocessor (the best or
// within 9% of the best tile at every measured shape, run gemm1). Under
// UseWGMMA the wgmma tiles w256o, w128o2 and w64o by the same rule, then
// m32 and m16: the best tile at each of the 12 shapes of 2026-12-06-wg3
// but the 512 x 512 x 2048 one, where m16 (split, as chosen) was 4 % faster
// than w64o.
func (g *GEMM) DenseTile(M, N int) GEMMTile {
	return g.in256(g.undrain(denseTile(M, N, g.c.Device().SMs, g.useWG, g.regA)))
}

// in256 is t, or DenseIn256's tile where t is w256rp and that tile's
// kernels are loaded.
func (g *GEMM) in256(t GEMMTile) GEMMTile {
	if g.dense256 != "" && t.Name == "w256rp" && g.tiles[g.dense256].dense != nil {
		t, _ = GEMMTileByName(g.dense256)
	}
	return t
}

// denseTile is DenseTile on a GPU of sms multiprocessors, wg and regA its
// UseWGMMA.
func denseTile(M, N, sms int, wg, regA bool) GEMMTile {
	chain := []string{"m128", "m64", "m32"}
	switch {
	case wg && regA:
		chain = []string{"w256r", "w128r", "w64r", "m32"}
	case wg:
		chain = []string{"w256o", "w128o2", "w64o", "m32"}
	}
	for _, name := range chain {
		t, _ := GEMMTileByName(name)
		if 10*((M+t.BM-1)/t.BM)*((N+t.BN-1)/t.BN) >= 9*sms {
			return t
		}
	}
	t, _ := GEMMTileByName("m16")
	return t
}

// Dense queues y[M,N] = x[M,K]·W^T on s: x bf16 row-major (ToBF16), y
// float32 row-major, W m of N rows by K columns.
func (g *GEMM) Dense(s *driver.Stream, t GEMMTile, m *QMatrix, x, y driver.Ptr, M int) error {
	return g.dense(s, t, m, x, y, y, M, 1)
}

// dense launches gemm_dense of tile t over K split splits ways, its
// outputs (for a split-K launch, the partials) at out; y is the checked
// output.
func (g *GEMM) dense(s *driver.Stream, t GEMMTile, m *QMatrix, x, y, out driver.Ptr, M, splits int) error {
	if err := checkGEMMWeights(m, "weight", m.Rows, m.Cols); err != nil {
		return err
	}
	if !aligned16(x, y, m.Words) {
		return fmt.Errorf("cuda: GEMM buffers must be 16-byte aligned")
	}
	k, ok := g.tiles[t.Name]
	if !ok || k.dense == nil {
		return fmt.Errorf("cuda: no dense GEMM of tile %q", t.Name)
	}
	if M <= 0 {
		return nil
	}
	N, K := m.Rows, m.Cols
	var a driver.Args
	a.Ptr(x).Ptr(m.Words).Ptr(m.ScaleBias).Ptr(out).I32(int32(M)).I32(int32(N)).I32(int32(K))
	return g.launchTile(s, k.dense, t, K, driver.Dim3{X: ceil(N, t.BN), Y: ceil(M, t.BM), Z: splits}, &a)
}

// DenseSplit queues ys[i][M, N_i] = x[M,K]·W_i^T for one matrix or a group
// (as Dense and DenseGroup) with K split splits ways: each block sums a
// splits-th of the k-tiles into parts, then gemm_sum_splits adds the
// partials in order. At a few rows the tiles are too few to fill the GPU
// and each walks all of K (gemm_dense_m16: 21-25 µs a launch at 16 rows
// whatever N, 52 µs for a 2048 x 4096 matrix); split, more blocks share
// the walk. parts holds splits·M·(the rows of all of ms) floats, 16-byte
// aligned; two launches.
func (g *GEMM) DenseSplit(s *driver.Stream, t GEMMTile, ms []*QMatrix, ys []driver.Ptr, parts, x driver.Ptr, M, splits int) error {
	k, ok := g.tiles[t.Name]
	if !ok || k.group == nil {
		return fmt.Errorf("cuda: no dense GEMM of tile %q", t.Name)
	}
	if len(ms) == 0 {
		return fmt.Errorf("cuda: a split GEMM of no matrices")
	}
	if splits < 1 || splits > ms[0].Cols/64 {
		return fmt.Errorf("cuda: a GEMM of %d columns split %d ways", ms[0].Cols, splits)
	}
	if !aligned16(parts) {
		return fmt.Errorf("cuda: GEMM buffers must be 16-byte aligned")
	}
	sums, err := QMVGroupTable(ms, ys)
	if err != nil {
		return err
	}
	if M <= 0 {
		return nil
	}
	ps, at, rows := make([]driver.Ptr, len(ms)), int64(0), 0
	for i, m := range ms {
		ps[i] = parts.Add(at)
		at += 4 * int64(splits*M*m.Rows)
		rows += m.Rows
	}
	if len(ms) == 1 {
		err = g.dense(s, t, ms[0], x, ys[0], parts, M, splits)
	} else {
		err = g.denseGroup(s, k, t, ms, ys, ps, x, M, splits)
	}
	if err != nil {
		return err
	}
	var a driver.Args
	a.Struct(sums).Ptr(parts).I32(int32(M)).I32(int32(splits))
	return s.Launch(g.sumSplits, driver.D1(ceil(M*rows, 1024)), driver.D1(256), 0, &a)
}

// DenseGroup queues ys[i][M, N_i] = x[M,K]·W_i^T on s for the matrices ms
// (at most QMVGroupMax, all K wide) in one launch of tile t, each block
// finding its matrix in their QMVGroupTable: x bf16 row-major (ToBF16),
// each y float32 row-major.
func (g *GEMM) DenseGroup(s *driver.Stream, t GEMMTile, ms []*QMatrix, ys []driver.Ptr, x driver.Ptr, M int) error {
	k, ok := g.tiles[t.Name]
	if !ok || k.group == nil {
		return fmt.Errorf("cuda: no grouped GEMM of tile %q", t.Name)
	}
	return g.denseGroup(s, k, t, ms, ys, ys, x, M, 1)
}

// denseGroup launches the grouped dense GEMM of tile t, its outputs (for a
// split-K launch, the partials) at outs; ys are the checked outputs.
func (g *GEMM) denseGroup(s *driver.Stream, k gemmKernels, t GEMMTile, ms []*QMatrix, ys, outs []driver.Ptr, x driver.Ptr, M, splits int) error {
	return g.denseGroupFn(s, k.group, t, ms, ys, outs, x, M, splits, nil)
}

// denseGroupFn is denseGroup through fn, a grouped dense kernel of tile t
// whose parameters after the group's (table, x, M, K) more adds.
func (g *GEMM) denseGroupFn(s *driver.Stream, fn *driver.Function, t GEMMTile, ms []*QMatrix, ys, outs []driver.Ptr, x driver.Ptr, M, splits int, more func(*driver.Args)) error {
	table, err := QMVGroupTable(ms, outs)
	if err != nil {
		return err
	}
	blocks := 0
	for i, m := range ms {
		if err := checkGEMMWeights(m, fmt.Sprintf("weight %d", i), m.Rows, ms[0].Cols); err != nil {
			return err
		}
		if !aligned16(m.Words, ys[i]) {
			return fmt.Errorf("cuda: GEMM buffers must be 16-byte aligned")
		}
		blocks += ceil(m.Rows, t.BN)
	}
	if !aligned16(x) {
		return fmt.Errorf("cuda: GEMM buffers must be 16-byte aligned")
	}
	if M <= 0 {
		return nil
	}
	K := ms[0].Cols
	var a driver.Args
	a.Struct(table).Ptr(x).I32(int32(M)).I32(int32(K))
	if more != nil {
		more(&a)
	}
	return g.launchTile(s, fn, t, K, driver.Dim3{X: blocks, Y: (M + t.BM - 1) / t.BM, Z: splits}, &a)
}

// MoEGroups are the device buffers of one MoE's grouping: Tokens·MoETopK
// (token, slot) pairs sorted by expert, tiled in Tile.BM-row tiles.
//
//	Counts [Experts], Offsets [Experts+1]: rows of each expert, their start;
//	Pos [Tokens·MoETopK]: the sorted row of each pair (-1 for a bad id);
//	RowTok [Tokens·MoETopK]: the token of each sorted row;
//	Tiles [2·MaxTiles]: (expert, first row) of each tile; NTiles [1];
//	Status [1]: the number of expert ids outside [0, Experts).
type MoEGroups struct {
	Tokens, Experts                                     int
	Tile                                                GEMMTile
	MaxTiles                                            int
	Counts, Offsets, Pos, RowTok, Tiles, NTiles, Status driver.Ptr
	// Hist is the block histograms of moe_group.cu's grouping
	// (groupHistInts ints), where RouteBlocks takes it
	Hist driver.Ptr
	c    *driver.Context
	mem  driver.Ptr
}

// groupPairs is GROUP_PAIRS (moe_group.cu): the pairs a block of the
// grouping's count and place passes takes; groupThreads GROUP_THREADS.
const (
	groupPairs   = 2048
	groupThreads = 1024
)

// groupBlocks is the blocks of moe_group.cu's count and place passes for
// tokens tokens, and groupHistInts the ints of their histograms (a row of
// experts a block, then each block's bad ids).
func groupBlocks(tokens int) int { return max(1, ceil(tokens*MoETopK, groupPairs)) }

func groupHistInts(tokens, experts int) int { return groupBlocks(tokens) * (experts + 1) }

// MoETile is the tile shape for tokens routed over experts: BM from the
// rows an expert receives on average (tokens·MoETopK/experts). At 16 rows
// on average m32 beats m16 (run gemm1: 390 against 457 µs at 512 tokens),
// the counts spreading to 30 and more; at 32, m64 beats m32 (2026-12-06-
// stream1: 508 against 559 µs at 1024 tokens). Under MoEReg, up to 16 rows
// on average take the register-dequant kernels of MoERegTiles instead;
// under MoEStream, gemm_stream's s16 (388 µs at 512 tokens, as m32; 641 at
// 1024).
func MoETile(tokens, experts int, kernel MoEKernel) GEMMTile {
	avg := tokens * MoETopK / max(experts, 1)
	name := "m128"
	switch {
	case (kernel == MoEStream || kernel == MoEWG) && avg <= 16:
		name = "s16"
	case kernel == MoEReg && avg <= 4:
		name = "r16"
	case kernel == MoEReg && avg <= 16:
		name = "r32"
	case avg <= 4:
		name = "m16"
	case avg <= 16:
		name = "m32"
	case avg <= 64:
		name = "m64"
	}
	t, _ := GEMMTileByName(name)
	return t
}

// MoETile is the package's MoETile, under UseWGMMA with the wgmma tiles in
// the places of m128 and m64: w128o2 from 32 rows an expert on average, w64o
// below (the MoE at 1024 / 2048 / 4096 tokens on an H100, 2026-12-06-wg3: m64
// 508 / 757 us, w64o 454 / 657, w128o2 574 / 631; m128 1,244 us, w128o2 975).
//
// With moe=wg under gemm=wgr, w32r from 5 to 16 rows an expert (512
// tokens: 308 us against s16's 365, w64r's 372; a 16-row w16r took 391,
// 2026-12-06-pipe2). Under UndrainedTiles w128r becomes w128rp but w64r
// stays (the MoE at 1024 tokens w64r 400 us, w64rp 414).
func (g *GEMM) MoETile(tokens, experts int, kernel MoEKernel) GEMMTile {
	avg := tokens * MoETopK / max(experts, 1)
	if g.useWG && g.regA && kernel == MoEWG && avg > 4 && avg <= 16 {
		w, _ := GEMMTileByName("w32r")
		return w
	}
	t := MoETile(tokens, experts, kernel)
	if !g.useWG || (t.Name != "m128" && t.Name != "m64") {
		return t
	}
	wide := avg > 32
	if g.regA {
		// w64r against w128rp: 400 against 517 us at 32 rows an expert,
		// 624 against 582 at 64 (2026-12-06-pipe2); the ratio's line
		// crosses 1 near 58, so 128-row tiles from 57 (1824 tokens).
		// Prefill of 1152 / 1536 tokens 8 / 3 % faster than with 128-row
		// tiles from 33 (2026-12-06-moepdl1).
		wide = avg > 56
	}
	name := "w64o"
	switch {
	case wide && g.regA:
		name = "w128r"
	case wide:
		name = "w128o2"
	case g.regA:
		name = "w64r"
	}
	w, _ := GEMMTileByName(name)
	if name == "w128r" {
		w = g.undrain(w)
	}
	if g.fit && g.regA && g.undrained && slices.ContainsFunc(g.wg, func(t GEMMTile) bool { return t.Name == "w160rp" }) {
		// an expert's rows spread about ±sqrt(avg) when routed evenly:
		// 80 rows hold 64 + 2σ, 160 hold 128 + 2.8σ
		switch {
		case g.fitAll && avg > 56 && avg <= 72:
			w, _ = GEMMTileByName("w80rp")
		case avg > 96 && avg <= 144:
			w, _ = GEMMTileByName("w160rp")
			if g.fitWidth && g.tiles["w160rw"].gateUp != nil {
				w, _ = GEMMTileByName("w160rw")
			}
		}
	}
	return w
}

// NewMoEGroups allocates the grouping buffers for up to tokens tokens.
func NewMoEGroups(c *driver.Context, tokens, experts int, tile GEMMTile) (*MoEGroups, error) {
	if experts < MoETopK || experts > 1024 {
		return nil, fmt.Errorf("cuda: MoE grouping of %d experts: built for %d to 1024", experts, MoETopK)
	}
	if tokens < 1 {
		return nil, fmt.Errorf("cuda: MoE grouping of %d tokens", tokens)
	}
	pairs := tokens * MoETopK
	maxTiles := (pairs+tile.BM-1)/tile.BM + experts
	sizes := []int{experts, experts + 1, pairs, pairs, 2 * maxTiles, 1, 1, groupHistInts(tokens, experts)}
	var total int64
	for _, n := range sizes {
		total += int64((4*n + 255) &^ 255)
	}
	mem, err := c.Alloc(total, "MoE groups")
	if err != nil {
		return nil, err
	}
	g := &MoEGroups{Tokens: tokens, Experts: experts, Tile: tile, MaxTiles: maxTiles, c: c, mem: mem}
	p := mem
	for i, dst := range []*driver.Ptr{&g.Counts, &g.Offsets, &g.Pos, &g.RowTok, &g.Tiles, &g.NTiles, &g.Status, &g.Hist} {
		*dst = p
		p = p.Add(int64((4*sizes[i] + 255) &^ 255))
	}
	return g, nil
}

// Free releases the buffers.
func (g *MoEGroups) Free() error {
	if g.mem == 0 {
		return nil
	}
	m := g.mem
	g.mem = 0
	return g.c.Free(m)
}

// Route queues the grouping of ids [Tokens·MoETopK] (int32, token t's k-th
// expert at t·MoETopK+k) into grp on s, for tokens ≤ grp.Tokens tokens.
func (g *GEMM) Route(s *driver.Stream, grp *MoEGroups, ids driver.Ptr, tokens int) error {
	if tokens < 1 || tokens > grp.Tokens {
		return fmt.Errorf("cuda: MoE grouping of %d tokens in buffers for %d", tokens, grp.Tokens)
	}
	var a driver.Args
	a.Ptr(ids).I32(int32(tokens)).I32(int32(grp.Experts)).I32(int32(grp.Tile.BM)).
		Ptr(grp.Counts).Ptr(grp.Offsets).Ptr(grp.Pos).Ptr(grp.RowTok).Ptr(grp.Tiles).Ptr(grp.NTiles).Ptr(grp.Status)
	if g.groupCount != nil && g.routeBlocks {
		return g.routeBlocksOn(s, grp, ids, tokens)
	}
	fn := g.route
	if g.routeAhead {
		fn = g.route8
	}
	return s.Launch(fn, driver.D1(1), driver.D1(1024), 0, &a)
}

// routeBlocksOn is Route through moe_group.cu's three kernels: the pairs
// counted by many blocks, one block's scan of their counts, the rows
// placed by many blocks.
func (g *GEMM) routeBlocksOn(s *driver.Stream, grp *MoEGroups, ids driver.Ptr, tokens int) error {
	if grp.Hist == 0 {
		return fmt.Errorf("cuda: MoE groups without the block histograms the many-block grouping needs")
	}
	if grp.Experts > groupThreads {
		return fmt.Errorf("cuda: the many-block MoE grouping takes up to %d experts, not %d", groupThreads, grp.Experts)
	}
	n, G := int32(tokens*MoETopK), groupBlocks(tokens)
	var a driver.Args
	a.Ptr(ids).I32(n).I32(int32(grp.Experts)).Ptr(grp.Pos).Ptr(grp.Hist)
	if err := s.Launch(g.groupCount, driver.D1(G), driver.D1(groupThreads), 0, &a); err != nil {
		return err
	}
	a = driver.Args{}
	a.I32(int32(G)).I32(int32(grp.Experts)).I32(int32(grp.Tile.BM)).Ptr(grp.Hist).Ptr(grp.Counts).Ptr(grp.Offsets).
		Ptr(grp.Tiles).Ptr(grp.NTiles).Ptr(grp.Status)
	if err := s.Launch(g.groupScan, driver.D1(1), driver.D1(groupThreads), 0, &a); err != nil {
		return err
	}
	a = driver.Args{}
	a.Ptr(ids).I32(n).I32(int32(grp.Experts)).Ptr(grp.Hist).Ptr(grp.Pos).Ptr(grp.RowTok)
	return s.Launch(g.groupPlace, driver.D1(G), driver.D1(groupThreads), 0, &a)
}

// RouteKernels is the launches of Route: three under RouteBlocks.
func (g *GEMM) RouteKernels() int {
	if g.groupCount != nil && g.routeBlocks {
		return 3
	}
	return 1
}

// LoadMoEGroupModule loads moe_group.cu's kernels (moegroup=blocks).
func LoadMoEGroupModule(c *driver.Context) (*driver.Module, error) { return loadFamily(c, "moe_group") }

// AddMoEGroup finds moe_group.cu's kernels in mod; RouteBlocks then
// chooses them.
func (g *GEMM) AddMoEGroup(mod *driver.Module) error {
	for _, f := range []struct {
		dst  **driver.Function
		name string
	}{{&g.groupCount, "moe_group_count"}, {&g.groupScan, "moe_group_scan"}, {&g.groupPlace, "moe_group_place"}} {
		fn, err := mod.Function(f.name)
		if err != nil {
			return err
		}
		*f.dst = fn
	}
	return nil
}

// RouteBlocks makes Route group the pairs through moe_group.cu's kernels
// (AddMoEGroup) rather than moe_route8's one block (moegroup=blocks).
func (g *GEMM) RouteBlocks(on bool) { g.routeBlocks = on }

// RouteAhead makes Route take moe_route8 (the default), whose threads load
// eight ids before their atomics rather than one: 43.5 us at 4096 tokens
// against moe_route's 47.2, 158.8 at 16384 against 175.4, both 9.2 at 512
// on an H200 (2026-12-06-narrow1); off, moe_route. The MoE tests run both.
func (g *GEMM) RouteAhead(on bool) { g.routeAhead = on }

// MoEGateUp queues the grouped gate and up projections with the SwiGLU on
// s: h[r] = silu(x[tok(r)]·gate_e^T) * (x[tok(r)]·up_e^T) for every sorted
// row r of expert e, h bf16 [Tokens·MoETopK, inter], x bf16 [tokens, hidden].
// gate and up are stacks of grp.Experts matrices of inter rows.
func (g *GEMM) MoEGateUp(s *driver.Stream, grp *MoEGroups, gate, up *QMatrix, inter, hidden int, x, h driver.Ptr) error {
	for _, w := range []struct {
		m    *QMatrix
		name string
	}{{gate, "expert gate"}, {up, "expert up"}} {
		if err := checkGEMMWeights(w.m, w.name, grp.Experts*inter, hidden); err != nil {
			return err
		}
	}
	if !aligned16(x, h) {
		return fmt.Errorf("cuda: MoE GEMM buffers must be 16-byte aligned")
	}
	t := grp.Tile
	if err := g.checkStream(t, hidden, inter); err != nil {
		return err
	}
	var a driver.Args
	a.Ptr(x).Ptr(grp.RowTok).Ptr(gate.Words).Ptr(gate.ScaleBias).Ptr(up.Words).Ptr(up.ScaleBias).Ptr(h).
		I32(int32(inter)).I32(int32(hidden)).Ptr(grp.Tiles).Ptr(grp.Offsets).Ptr(grp.NTiles)
	grid := driver.Dim3{X: (inter + t.BN/2 - 1) / (t.BN / 2), Y: grp.MaxTiles, Z: 1}
	if t.Reg {
		grid = g.itemGrid(t, grp.MaxTiles*ceil(inter, t.itemOutputs(true)))
	}
	return g.launchTile(s, g.tiles[t.Name].gateUp, t, hidden, grid, &a)
}

// MoEDown queues the grouped down projection on s: ys[r] = h[r]·down_e^T,
// ys float32 [Tokens·MoETopK, hidden]; down is a stack of grp.Experts
// matrices of hidden rows by inter columns.
func (g *GEMM) MoEDown(s *driver.Stream, grp *MoEGroups, down *QMatrix, hidden, inter int, h, ys driver.Ptr) error {
	if err := checkGEMMWeights(down, "expert down", grp.Experts*hidden, inter); err != nil {
		return err
	}
	if !aligned16(h, ys) {
		return fmt.Errorf("cuda: MoE GEMM buffers must be 16-byte aligned")
	}
	t := grp.Tile
	if err := g.checkStream(t, hidden, inter); err != nil {
		return err
	}
	var a driver.Args
	a.Ptr(h).Ptr(down.Words).Ptr(down.ScaleBias).Ptr(ys).I32(int32(hidden)).I32(int32(inter)).
		Ptr(grp.Tiles).Ptr(grp.Offsets).Ptr(grp.NTiles)
	grid := driver.Dim3{X: (hidden + t.BN - 1) / t.BN, Y: grp.MaxTiles, Z: 1}
	if t.Reg {
		grid = g.itemGrid(t, grp.MaxTiles*ceil(hidden, t.itemOutputs(false)))
	}
	return g.launchTile(s, g.tiles[t.Name].down, t, inter, grid, &a)
}

// MoEDownBF is MoEDown with the expert outputs ys written in bf16
// [pairs][hidden] (gemm_downbf.cu) for MoECombineBF; the tile must be one
// of DownBFTiles (DownBF).
func (g *GEMM) MoEDownBF(s *driver.Stream, grp *MoEGroups, down *QMatrix, hidden, inter int, h, ys driver.Ptr) error {
	t := grp.Tile
	fn := g.downBF[t.Name]
	if fn == nil {
		return fmt.Errorf("cuda: no down GEMM with bf16 outputs for tile %s (moeys=bf16 takes %v)", t, DownBFTiles)
	}
	if err := checkGEMMWeights(down, "expert down", grp.Experts*hidden, inter); err != nil {
		return err
	}
	if !aligned16(h, ys) {
		return fmt.Errorf("cuda: MoE GEMM buffers must be 16-byte aligned")
	}
	var a driver.Args
	a.Ptr(h).Ptr(down.Words).Ptr(down.ScaleBias).Ptr(ys).I32(int32(hidden)).I32(int32(inter)).
		Ptr(grp.Tiles).Ptr(grp.Offsets).Ptr(grp.NTiles)
	grid := driver.Dim3{X: (hidden + t.BN - 1) / t.BN, Y: grp.MaxTiles, Z: 1}
	return g.launchTile(s, fn, t, inter, grid, &a)
}

// itemGrid is the grid of a Reg tile's kernel: as many blocks as fit the
// GPU at once, or the most items there can be.
func (g *GEMM) itemGrid(t GEMMTile, maxItems int) driver.Dim3 {
	return driver.D1(max(1, min(maxItems, t.Blocks*g.c.Device().SMs)))
}

// SharedSwiGLU queues h[t,i] = bf16(sigmoid(logit[t])·silu(gs[t,i])·us[t,i])
// on s for rows rows of inter values: the shared expert's activations,
// gated, for its down GEMM. gs, us float32 [rows, inter]; h bf16.
func (g *GEMM) SharedSwiGLU(s *driver.Stream, gs, us, logit, h driver.Ptr, rows, inter int) error {
	n := int64(rows) * int64(inter)
	if n <= 0 {
		return nil
	}
	var a driver.Args
	a.Ptr(gs).Ptr(us).Ptr(logit).Ptr(h).I32(int32(inter)).I64(n)
	return s.Launch(g.sharedSwiGLU, driver.D1(int((n+255)/256)), driver.D1(256), 0, &a)
}

// MoECombine queues out[t] = (add ? out[t] : 0) + Σ_k wts[t,k]·ys[pos(t,k)]
// for tokens tokens on s, in slot order (so the result does not depend on
// the order of rows inside a group); wts float32 [tokens·MoETopK]. A token
// with an expert id outside the stack gets a row of NaN.
func (g *GEMM) MoECombine(s *driver.Stream, grp *MoEGroups, ys, wts, out driver.Ptr, tokens, hidden int, add bool) error {
	return g.moeCombine(s, g.combine, grp, ys, wts, out, tokens, hidden, add)
}

// MoECombineBF is MoECombine over bf16 expert outputs (MoEDownBF's), its
// sums float32 (moe_combine_bf).
func (g *GEMM) MoECombineBF(s *driver.Stream, grp *MoEGroups, ys, wts, out driver.Ptr, tokens, hidden int, add bool) error {
	if g.combineBF == nil {
		return fmt.Errorf("cuda: moe_combine_bf is not loaded (moeys=bf16)")
	}
	return g.moeCombine(s, g.combineBF, grp, ys, wts, out, tokens, hidden, add)
}

func (g *GEMM) moeCombine(s *driver.Stream, fn *driver.Function, grp *MoEGroups, ys, wts, out driver.Ptr, tokens, hidden int, add bool) error {
	if hidden%4 != 0 || !aligned16(ys, out) {
		return fmt.Errorf("cuda: MoE combine of %d columns: want a multiple of 4 and 16-byte aligned buffers", hidden)
	}
	if tokens < 1 || tokens > grp.Tokens {
		return fmt.Errorf("cuda: MoE combine of %d tokens in buffers for %d", tokens, grp.Tokens)
	}
	addFlag := int32(0)
	if add {
		addFlag = 1
	}
	var a driver.Args
	a.Ptr(ys).Ptr(grp.Pos).Ptr(wts).Ptr(out).I32(int32(hidden)).I32(addFlag)
	return s.Launch(fn, driver.D1(tokens), driver.D1(256), 0, &a)
}
