package metal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"petal/engine/backend"
	"petal/engine/metal/dispatch"
	"petal/engine/metal/kernels"
	"petal/engine/quant"
)

// The tests of this file run everywhere: they check what the lowering
// launches through a dispatcher that records it (fake_test.go), against
// the kernels' own sources and params.h, not what the kernels compute
// (conformance_test.go does that on a GPU).

func newRecorded(t *testing.T, o Options) (*Backend, *recorder) {
	t.Helper()
	r := &recorder{}
	b, err := New(r, o)
	if err != nil {
		t.Fatal(err)
	}
	return b, r
}

// fixture makes buffers and matrices on a recorded backend.
type fixture struct {
	t   *testing.T
	b   *Backend
	rng *rand.Rand
}

func (f fixture) buf(n int, t backend.DType) backend.Buffer {
	f.t.Helper()
	b, err := f.b.Alloc(n, t)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func (f fixture) f32(n int) backend.Buffer { return f.buf(n, backend.F32) }

func (f fixture) mat(experts, rows, cols, bits int) backend.Matrix {
	f.t.Helper()
	m, err := f.b.Upload(quant.RandomMatrix(f.rng, experts, rows, cols, bits, 64))
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

func compile(t *testing.T, b *Backend, ops ...backend.Op) *program {
	t.Helper()
	p, err := b.Compile(ops)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*program)
}

// launched describes a program's commands: "entry groups threads" per
// dispatch, "|" per barrier.
func launched(p *program) []string {
	var out []string
	for _, c := range p.cmds {
		if c.Barrier {
			out = append(out, "|")
			continue
		}
		out = append(out, fmt.Sprintf("%s %v %v", c.Kernel.Name(), c.Groups, c.Threads))
	}
	return out
}

// An op of every kind at the conformance suite's shapes (several rows) and
// at one row, so that both the generic and the decode kernels are
// lowered.
func everyOp(f fixture, rows int, kv backend.DType) []backend.Op {
	const (
		vocab, H                = 53, 192
		QH, KVH, D, rot, maxPos = 6, 2, 40, 24, 50
		Hk, Dk, Hv, Dv, K       = 2, 24, 4, 20, 4
		E, inter, sInter, topK  = 7, 128, 192, 3
	)
	C := 2*Hk*Dk + Hv*Dv
	pos := f.buf(1, backend.I32)
	qg, kk, vv := f.f32(rows*QH*2*D), f.f32(rows*KVH*D), f.f32(rows*KVH*D)
	q := f.f32(rows * QH * D)
	kc, vc := f.buf(maxPos*KVH*D, kv), f.buf(maxPos*KVH*D, kv)
	x := f.f32(rows * H)
	idx, wts := f.buf(rows*topK, backend.I32), f.f32(rows*topK)
	return []backend.Op{
		&backend.Embed{Tokens: f.buf(rows, backend.I32), Table: f.mat(1, vocab, H, 4), Out: f.f32(rows * H), Rows: rows},
		&backend.AddRMSNorm{H: f.f32(rows * H), Delta: f.f32(rows * H), Weight: f.f32(H), Out: f.f32(rows * H), Rows: rows, Dim: H, Eps: 1e-6},
		&backend.QLinear{X: x, W: f.mat(1, 67, H, 4), Y: f.f32(rows * 67), Rows: rows},
		&backend.QLinear{X: x, W: f.mat(1, 67, H, 8), Y: f.f32(rows * 67), Rows: rows},
		&backend.QLinearGroup{X: x, W: []backend.Matrix{f.mat(1, 67, H, 4), f.mat(1, 9, H, 8)}, Y: f.f32(rows * 76), Rows: rows},
		&backend.ConvSiLU{X: f.f32(rows * C), State: f.f32((K - 1) * C), Weight: f.f32(C * K), Out: f.f32(rows * C), Rows: rows, Chans: C, K: K},
		&backend.DeltaRule{QKV: f.f32(rows * C), B: f.f32(rows * Hv), A: f.f32(rows * Hv), ALog: f.f32(Hv), DtBias: f.f32(Hv),
			State: f.f32(Hv * Dv * Dk), Out: f.f32(rows * Hv * Dv), Rows: rows, KeyHeads: Hk, KeyDim: Dk, ValueHeads: Hv, ValueDim: Dv},
		&backend.GatedRMSNorm{X: f.f32(rows * 5 * 19), Z: f.f32(rows * 5 * 19), Weight: f.f32(19), Out: f.f32(rows * 5 * 19), Rows: rows, Heads: 5, Dim: 19, Eps: 1e-6},
		&backend.QKPrep{QG: qg, K: kk, V: vv, QNorm: f.f32(D), KNorm: f.f32(D), Q: q, KCache: kc, VCache: vc, Pos: pos, Rows: rows,
			QHeads: QH, KVHeads: KVH, HeadDim: D, RotaryDim: rot, RopeTheta: 1e7, Eps: 1e-6},
		&backend.Attention{Q: q, QG: qg, KCache: kc, VCache: vc, Out: f.f32(rows * QH * D), Pos: pos, Rows: rows, QHeads: QH, KVHeads: KVH, HeadDim: D},
		&backend.Route{X: x, Router: f.mat(1, E, H, 8), Idx: idx, Weights: wts, Rows: rows, TopK: topK, Normalize: true},
		&backend.Experts{X: x, Idx: idx, Weights: wts, Gate: f.mat(E, inter, H, 4), Up: f.mat(E, inter, H, 4), Down: f.mat(E, H, inter, 4),
			SharedGate: f.mat(1, sInter, H, 4), SharedUp: f.mat(1, sInter, H, 4), SharedDown: f.mat(1, H, sInter, 4),
			SharedExpertGate: f.mat(1, 1, H, 8), Out: f.f32(rows * H), Rows: rows, TopK: topK, Inter: inter, SharedInter: sInter},
		&backend.Advance{Pos: pos, By: rows},
		&backend.Sample{Logits: f.f32(vocab), Params: f.f32(backend.SampleParamCount), Config: f.buf(backend.SampleConfigCount, backend.I32),
			Counts: f.buf(vocab, backend.I32), InPrompt: f.buf(vocab, backend.I32), Token: f.buf(1, backend.I32), Status: f.buf(2, backend.I32), Vocab: vocab},
		&backend.Logprobs{Logits: f.f32(vocab), Token: f.buf(1, backend.I32), Out: f.f32(4), TopIDs: f.buf(3, backend.I32), Vocab: vocab, TopN: 3},
		&backend.Logprobs{Logits: f.f32(vocab), Token: f.buf(1, backend.I32), Out: f.f32(1), Vocab: vocab},
	}
}

// signature is a kernel's bindings as its .metal source declares them:
// the number of [[buffer(n)]] parameters, the params.h struct taken by
// constant reference ("" for none), and each buffer's address space and
// access ("device const", "device" for one the kernel may write,
// "constant"), by index.
type signature struct {
	buffers int
	params  string
	spaces  []string
}

var (
	bufferAttr  = regexp.MustCompile(`\[\[\s*buffer\(\s*(\d+)\s*\)\s*\]\]`)
	constantRef = regexp.MustCompile(`constant\s+(\w+)\s*&`)
	layoutLine  = regexp.MustCompile(`PETAL_LAYOUT\((\w+),\s*(\d+)\)`)
)

// signatures reads every kernel of family's source.
func signatures(t *testing.T, family string) (map[string]signature, map[string]int) {
	t.Helper()
	src, err := kernels.Source(family)
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int{}
	for _, m := range layoutLine.FindAllStringSubmatch(src, -1) {
		sizes[m[1]], _ = strconv.Atoi(m[2])
	}
	sigs := map[string]signature{}
	for _, m := range regexp.MustCompile(`kernel\s+void\s+(\w+)\s*\(`).FindAllStringSubmatchIndex(src, -1) {
		name := src[m[2]:m[3]]
		depth, end := 1, m[1]
		for ; depth > 0 && end < len(src); end++ {
			switch src[end] {
			case '(':
				depth++
			case ')':
				depth--
			}
		}
		list := src[m[1]:end]
		s := signature{buffers: len(bufferAttr.FindAllString(list, -1))}
		s.spaces = make([]string, s.buffers)
		for _, b := range bufferAttr.FindAllStringSubmatchIndex(list, -1) {
			i, _ := strconv.Atoi(list[b[2]:b[3]])
			param := strings.TrimSpace(list[strings.LastIndex(list[:b[0]], ",")+1 : b[0]])
			if i >= len(s.spaces) {
				t.Fatalf("%s.metal: %s binds buffer %d of %d", family, name, i, s.buffers)
			}
			switch {
			case strings.HasPrefix(param, "device const "), strings.HasPrefix(param, "const device "):
				s.spaces[i] = "device const"
			case strings.HasPrefix(param, "device "):
				s.spaces[i] = "device"
			case strings.HasPrefix(param, "constant "):
				s.spaces[i] = "constant"
			default:
				t.Fatalf("%s.metal: %s: buffer %d has no address space I know: %q", family, name, i, param)
			}
		}
		if c := constantRef.FindStringSubmatch(list); c != nil {
			s.params = c[1]
		}
		sigs[name] = s
	}
	return sigs, sizes
}

// sourceCheck checks dispatches against their kernels' sources, reading
// each family's once.
type sourceCheck struct {
	fams map[string]family
	seen map[string]bool // "family.entry" of every dispatch checked
}

type family struct {
	sigs  map[string]signature
	sizes map[string]int
}

func newSourceCheck() *sourceCheck {
	return &sourceCheck{fams: map[string]family{}, seen: map[string]bool{}}
}

// program checks every dispatch of p: the entry point exists in its
// family, the buffers bound are the ones it declares before its parameter
// struct, the parameter bytes are that struct's size in params.h, at most
// 31 bindings, at most 1024 threads.
func (sc *sourceCheck) program(t *testing.T, p *program, what string) {
	t.Helper()
	for i, c := range p.cmds {
		if c.Barrier {
			continue
		}
		e := c.Kernel.(entry)
		fm, ok := sc.fams[e.family]
		if !ok {
			s, z := signatures(t, e.family)
			fm = family{s, z}
			sc.fams[e.family] = fm
		}
		label := fmt.Sprintf("%s: %s (op %d, %s)", what, e.name, p.opOf[i], backend.LabelOf(p.ops[p.opOf[i]]))
		sig, ok := fm.sigs[e.name]
		if !ok {
			t.Errorf("%s: %s.metal has no kernel %s", label, e.family, e.name)
			continue
		}
		sc.seen[e.family+"."+e.name] = true
		bound := len(c.Buffers)
		if sig.params != "" {
			bound++
			if want := fm.sizes[sig.params]; len(c.Params) != want {
				t.Errorf("%s: %d parameter bytes, %s is %d", label, len(c.Params), sig.params, want)
			}
		} else if len(c.Params) != 0 {
			t.Errorf("%s: %d parameter bytes for a kernel without a parameter struct", label, len(c.Params))
		}
		if bound != sig.buffers {
			t.Errorf("%s: %d bindings, the kernel declares %d", label, bound, sig.buffers)
		}
		if bound > dispatch.MaxBuffers || c.Threads.Threads() > 1024 {
			t.Errorf("%s: %d bindings, %d threads", label, bound, c.Threads.Threads())
		}
	}
}

func (sc *sourceCheck) entries() []string { return slices.Sorted(maps.Keys(sc.seen)) }

// TestDispatchesMatchKernelSources lowers every op at several rows and at
// one, fused and not, with f32 and bf16 caches, and checks each dispatch
// against its kernel's source (sourceCheck.program).
func TestDispatchesMatchKernelSources(t *testing.T) {
	sc := newSourceCheck()
	for _, fused := range []bool{true, false} {
		for _, kv := range []backend.DType{backend.F32, backend.BF16} {
			for _, rows := range []int{1, 5, 300} {
				b, _ := newRecorded(t, Options{Fused: fused, KV: kv})
				f := fixture{t, b, rand.New(rand.NewPCG(1, uint64(rows)))}
				p := compile(t, b, everyOp(f, rows, kv)...)
				sc.program(t, p, fmt.Sprintf("rows %d fused %v kv %s", rows, fused, kv))
			}
		}
	}
	t.Logf("entry points lowered to: %v", sc.entries())
}

// paramsOf decodes a command's parameter bytes into a params.go struct.
func paramsOf[T any](t *testing.T, c dispatch.Command) T {
	t.Helper()
	var v T
	if err := binary.Read(bytes.NewReader(c.Params), binary.LittleEndian, &v); err != nil {
		t.Fatalf("%s: parameters %x: %v", c.Kernel.Name(), c.Params, err)
	}
	return v
}

// paramsMatch: params(v) is v's fields in order, little-endian and
// unpadded.
func paramsMatch[T any](t *testing.T, v T) {
	t.Helper()
	var want bytes.Buffer
	if err := binary.Write(&want, binary.LittleEndian, v); err != nil {
		t.Fatal(err)
	}
	if got := params(v); !bytes.Equal(got, want.Bytes()) {
		t.Errorf("%T: bytes %x, want %x", v, got, want.Bytes())
	}
}

// TestParamsBytesAreParamsGo: the bytes a dispatch carries are the Go
// twin's fields in order, little-endian and unpadded, as params.h lays
// them out (params_test.go of engine/metal/kernels checks the twins
// against the header).
func TestParamsBytesAreParamsGo(t *testing.T) {
	paramsMatch(t, kernels.QmvParams{Rows: 1, Cols: 2, Team: 3})
	paramsMatch(t, kernels.RouteParams{Experts: 1, Cols: 2, Topk: 3, Normalize: 4})
	paramsMatch(t, kernels.GdnParams{Hk: 1, Hv: 2, Eps: 0.5})
	paramsMatch(t, kernels.QKPrepParams{MaxPos: 1, QH: 2, KVH: 3, Rot: 4, Eps: 0.5})
	paramsMatch(t, kernels.AttnSplitParams{KVH: 1, MaxSplits: 2, MinChunk: 3})
	paramsMatch(t, kernels.AttnCombineParams{MaxSplits: 1, MinChunk: 2})
	paramsMatch(t, kernels.MoeUpParams{I: 1, H: 2, Team: 3})
	paramsMatch(t, kernels.MoeDownParams{H: 1, I: 2, Team: 3})
	paramsMatch(t, kernels.QShape{Rows: 1, Cols: 2, Bits: 3, Group: 4, Wpr: 5, Gpr: 6})
	paramsMatch(t, kernels.NormParams{Dim: 1, HasDelta: 2, Eps: 0.5})
	paramsMatch(t, kernels.GemmParams{T: 1, Ldy: 2})
	paramsMatch(t, kernels.ConvParams{Rows: 1, C: 2, K: 3})
	paramsMatch(t, kernels.DeltaParams{Rows: 1, Hk: 2, Dk: 3, Hv: 4, Dv: 5})
	paramsMatch(t, kernels.GatedNormParams{Count: 1, Dim: 2, Eps: 0.5})
	paramsMatch(t, kernels.QKPrepRowsParams{MaxPos: 1, QH: 2, KVH: 3, D: 4, Rot: 5, Eps: 0.5})
	paramsMatch(t, kernels.AttnRowsParams{Rows: 1, QH: 2, KVH: 3, D: 4})
	paramsMatch(t, kernels.RouteRowsParams{E: 1, TopK: 2, Normalize: 3})
	paramsMatch(t, kernels.ExpertsParams{Rows: 1, Dim: 2, TopK: 3, Inter: 4, Sinter: 5})
	paramsMatch(t, kernels.AdvanceParams{By: -7})
	paramsMatch(t, kernels.ConvertParams{N: 1 << 31, From: 1, To: 2})
	paramsMatch(t, kernels.SampleParams{V: 1, FastOn: 2})
	paramsMatch(t, kernels.LogprobsParams{V: 1, TopN: 2})
}

// TestKernelChoice: the entry, grid and threadgroup per op and shape, and
// the parameters that say the shape.
func TestKernelChoice(t *testing.T) {
	b, _ := newRecorded(t, DefaultOptions())
	f := fixture{t, b, rand.New(rand.NewPCG(2, 2))}
	one := func(op backend.Op) []string {
		t.Helper()
		return launched(compile(t, b, op))
	}
	x := f.f32(300 * 2048)
	for _, c := range []struct {
		name string
		op   backend.Op
		want []string
	}{
		{"QLinear 4-bit 1 row: the mat-vec, 2 lanes a row (3 groups), 256 rows a threadgroup",
			&backend.QLinear{X: x, W: f.mat(1, 67, 192, 4), Y: f.f32(67), Rows: 1}, []string{"qmv_f32_r2_sb 1x1x1 256x1x1"}},
		{"QLinear 4-bit 1 row of 2048: 32 lanes a row, 16 rows a threadgroup",
			&backend.QLinear{X: x, W: f.mat(1, 513, 2048, 4), Y: f.f32(513), Rows: 1}, []string{"qmv_f32_r2_sb 33x1x1 256x1x1"}},
		{"QLinear 8-bit 1 row: the GEMM's small tiles",
			&backend.QLinear{X: x, W: f.mat(1, 67, 192, 8), Y: f.f32(67), Rows: 1}, []string{"qgemm_s 3x1x1 256x1x1"}},
		{"QLinear 5 rows: small tiles",
			&backend.QLinear{X: x, W: f.mat(1, 67, 192, 4), Y: f.f32(5 * 67), Rows: 5}, []string{"qgemm_s 3x1x1 256x1x1"}},
		{"QLinear 300 rows of 2048 outputs: large tiles (32 x 5 of them)",
			&backend.QLinear{X: x, W: f.mat(1, 2048, 2048, 4), Y: f.f32(300 * 2048), Rows: 300}, []string{"qgemm 32x5x1 256x1x1"}},
		{"Attention heads of 40: two values a lane",
			&backend.Attention{Q: f.f32(3 * 6 * 40), QG: f.f32(3 * 6 * 80), KCache: f.f32(50 * 80), VCache: f.f32(50 * 80), Out: f.f32(3 * 6 * 40),
				Pos: f.buf(1, backend.I32), Rows: 3, QHeads: 6, KVHeads: 2, HeadDim: 40}, []string{"attn_rows_f32_j2 3x1x1 256x1x1"}},
		{"Attention bf16 heads of 100: four a lane",
			&backend.Attention{Q: f.f32(6 * 100), QG: f.f32(6 * 200), KCache: f.buf(50*200, backend.BF16), VCache: f.buf(50*200, backend.BF16),
				Out: f.f32(6 * 100), Pos: f.buf(1, backend.I32), Rows: 1, QHeads: 6, KVHeads: 2, HeadDim: 100}, []string{"attn_rows_bf16_j4 1x1x1 256x1x1"}},
		{"QKPrep: a threadgroup per head and row, a thread per value",
			&backend.QKPrep{QG: f.f32(3 * 6 * 80), K: f.f32(3 * 80), V: f.f32(3 * 80), QNorm: f.f32(40), KNorm: f.f32(40), Q: f.f32(3 * 6 * 40),
				KCache: f.f32(50 * 80), VCache: f.f32(50 * 80), Pos: f.buf(1, backend.I32), Rows: 3, QHeads: 6, KVHeads: 2, HeadDim: 40, RotaryDim: 24, RopeTheta: 1e7},
			[]string{"qk_prep_rows_f32 8x3x1 64x1x1"}},
		{"Route: logits into the scratch, a barrier, the selection",
			&backend.Route{X: x, Router: f.mat(1, 13, 192, 8), Idx: f.buf(15, backend.I32), Weights: f.f32(15), Rows: 5, TopK: 3},
			[]string{"qgemm_s 1x1x1 256x1x1", "|", "route_select_rows 5x1x1 32x1x1"}},
		{"ConvSiLU 100 rows of 37 channels: 4 blocks of 32 rows",
			&backend.ConvSiLU{X: f.f32(100 * 37), State: f.f32(3 * 37), Weight: f.f32(37 * 4), Out: f.f32(100 * 37), Rows: 100, Chans: 37, K: 4},
			[]string{"conv_silu 1x4x1 256x1x1"}},
		{"DeltaRule: a simdgroup per state row",
			&backend.DeltaRule{QKV: f.f32(5 * 176), B: f.f32(20), A: f.f32(20), ALog: f.f32(4), DtBias: f.f32(4), State: f.f32(4 * 20 * 24), Out: f.f32(5 * 80),
				Rows: 5, KeyHeads: 2, KeyDim: 24, ValueHeads: 4, ValueDim: 20}, []string{"delta_rule 10x1x1 256x1x1"}},
		{"Advance", &backend.Advance{Pos: f.buf(1, backend.I32), By: 3}, []string{"advance 1x1x1 1x1x1"}},
		{"Rows 0: nothing", &backend.QLinear{X: x, W: f.mat(1, 67, 192, 4), Y: f.f32(0), Rows: 0}, nil},
	} {
		if got := one(c.op); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}

	// the plain path for one row where fused=off
	plain, _ := newRecorded(t, Options{Fused: false})
	pf := fixture{t, plain, f.rng}
	lin := &backend.QLinear{X: pf.f32(192), W: pf.mat(1, 67, 192, 4), Y: pf.f32(67), Rows: 1}
	if got := launched(compile(t, plain, lin)); !slices.Equal(got, []string{"qgemm_s 3x1x1 256x1x1"}) {
		t.Errorf("fused=off, one row: %q", got)
	}
}

// TestParamsSayTheShape: the parameter structs carry the op's shape.
func TestParamsSayTheShape(t *testing.T) {
	b, _ := newRecorded(t, DefaultOptions())
	f := fixture{t, b, rand.New(rand.NewPCG(3, 3))}
	ops := everyOp(f, 5, backend.BF16)
	p := compile(t, b, ops...)
	byName := map[string]dispatch.Command{}
	for _, c := range p.cmds {
		if !c.Barrier {
			byName[c.Kernel.Name()] = c
		}
	}
	check := func(name string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	check("add_rmsnorm", paramsOf[kernels.NormParams](t, byName["add_rmsnorm"]), kernels.NormParams{Dim: 192, HasDelta: 1, Eps: 1e-6})
	check("conv_silu", paramsOf[kernels.ConvParams](t, byName["conv_silu"]), kernels.ConvParams{Rows: 5, C: 176, K: 4})
	check("delta_rule", paramsOf[kernels.DeltaParams](t, byName["delta_rule"]), kernels.DeltaParams{Rows: 5, Hk: 2, Dk: 24, Hv: 4, Dv: 20})
	check("gated_rmsnorm", paramsOf[kernels.GatedNormParams](t, byName["gated_rmsnorm"]), kernels.GatedNormParams{Count: 25, Dim: 19, Eps: 1e-6})
	check("qk_prep_rows_bf16", paramsOf[kernels.QKPrepRowsParams](t, byName["qk_prep_rows_bf16"]),
		kernels.QKPrepRowsParams{MaxPos: 50, QH: 6, KVH: 2, D: 40, Rot: 24, Eps: 1e-6})
	check("attn_rows_bf16_j2", paramsOf[kernels.AttnRowsParams](t, byName["attn_rows_bf16_j2"]), kernels.AttnRowsParams{Rows: 5, QH: 6, KVH: 2, D: 40})
	check("route_select_rows", paramsOf[kernels.RouteRowsParams](t, byName["route_select_rows"]), kernels.RouteRowsParams{E: 7, TopK: 3, Normalize: 1})
	check("experts_gate_up", paramsOf[kernels.ExpertsParams](t, byName["experts_gate_up"]), kernels.ExpertsParams{Rows: 5, Dim: 192, TopK: 3, Inter: 128, Sinter: 192})
	check("experts_gate_up grid", byName["experts_gate_up"].Groups, dispatch.D1(ceil(5*(3*128+192+1), 8)))
	check("experts_down grid", byName["experts_down"].Groups, dispatch.D1(ceil(5*192, 8)))
	check("advance", paramsOf[kernels.AdvanceParams](t, byName["advance"]), kernels.AdvanceParams{By: 5})
	check("sample_prep", paramsOf[kernels.SampleParams](t, byName["sample_prep"]), kernels.SampleParams{V: 53, FastOn: 1})
	check("sample_prep grid", byName["sample_prep"].Groups, dispatch.D1(128))
	check("sample_prep threads", byName["sample_prep"].Threads, dispatch.D1(256))
	check("sample_row", paramsOf[kernels.SampleParams](t, byName["sample_row"]), kernels.SampleParams{V: 53, FastOn: 1})
	check("sample_row threads", byName["sample_row"].Threads, dispatch.D1(1024))

	// QLinearGroup: one GEMM per matrix, each into its block of y
	var gemms []dispatch.Command
	for i, c := range p.cmds {
		if !c.Barrier && p.opOf[i] == 4 {
			gemms = append(gemms, c)
		}
	}
	grp := ops[4].(*backend.QLinearGroup)
	y, _ := b.arg(grp.Y)
	if len(gemms) != 2 || gemms[0].Buffers[5] != y || gemms[1].Buffers[5] != y.Add(4*5*67) {
		t.Errorf("QLinearGroup: %d GEMMs, y at %+v; want 2, at y and y+%d", len(gemms), gemms, 4*5*67)
	} else {
		check("group GEMM 0", paramsOf[kernels.GemmParams](t, gemms[0]), kernels.GemmParams{T: 5, Ldy: 67})
		check("group GEMM 1", paramsOf[kernels.GemmParams](t, gemms[1]), kernels.GemmParams{T: 5, Ldy: 9})
	}

	// the experts' QShape table: the seven matrices in the kernels' order
	gu := byName["experts_gate_up"]
	table, err := at(gu.Buffers[15], 7*24)
	if err != nil {
		t.Fatal(err)
	}
	ex := ops[11].(*backend.Experts)
	for i, m := range []backend.Matrix{ex.Gate, ex.Up, ex.SharedGate, ex.SharedUp, ex.SharedExpertGate, ex.Down, ex.SharedDown} {
		want := params(m.(*matrix).q)
		if !bytes.Equal(table[24*i:24*i+24], want) {
			t.Errorf("experts shape table entry %d: %x, want %x", i, table[24*i:24*i+24], want)
		}
	}
}

// barriersOf is the program's commands as the op index of each dispatch,
// -1 for a barrier.
func barriersOf(p *program) []int {
	var out []int
	for i, c := range p.cmds {
		if c.Barrier {
			out = append(out, -1)
		} else {
			out = append(out, p.opOf[i])
		}
	}
	return out
}

// TestBarriers: a barrier before an op exactly where it conflicts with an
// op since the last barrier: independent ops share a stretch, a reader
// waits for its writer, a writer for the readers before it, two ops with
// temporaries never overlap, and an op that dispatches nothing hides no
// conflict.
func TestBarriers(t *testing.T) {
	b, _ := newRecorded(t, DefaultOptions())
	f := fixture{t, b, rand.New(rand.NewPCG(4, 4))}
	const H = 192
	h, a := f.f32(H), f.f32(H)
	w1, w2 := f.mat(1, 67, H, 4), f.mat(1, 9, H, 4)
	y1, y2 := f.f32(67), f.f32(9)
	norm := &backend.AddRMSNorm{H: h, Weight: f.f32(H), Out: a, Rows: 1, Dim: H, Eps: 1e-6}
	lin1 := &backend.QLinear{X: a, W: w1, Y: y1, Rows: 1}
	lin2 := &backend.QLinear{X: a, W: w2, Y: y2, Rows: 1}
	// reads y1: waits for lin1; writes a, which lin1 and lin2 read
	norm2 := &backend.AddRMSNorm{H: f.f32(67), Delta: y1, Weight: f.f32(67), Out: a.View(0, 67), Rows: 1, Dim: 67, Eps: 1e-6}
	if got, want := barriersOf(compile(t, b, norm, lin1, lin2, norm2)), []int{0, -1, 1, 2, -1, 3}; !slices.Equal(got, want) {
		t.Errorf("norm, two projections of its output, a norm of one: %v, want %v", got, want)
	}
	// independent ops: no barrier at all
	lin3 := &backend.QLinear{X: h, W: w2, Y: f.f32(9), Rows: 1}
	if got, want := barriersOf(compile(t, b, lin1, lin3)), []int{0, 1}; !slices.Equal(got, want) {
		t.Errorf("two independent projections: %v, want %v", got, want)
	}
	// two routers over separate buffers: each takes the scratch
	x2, x3 := f.f32(2*H), f.f32(2*H)
	r1 := &backend.Route{X: x2, Router: f.mat(1, 13, H, 8), Idx: f.buf(6, backend.I32), Weights: f.f32(6), Rows: 2, TopK: 3}
	r2 := &backend.Route{X: x3, Router: f.mat(1, 13, H, 8), Idx: f.buf(6, backend.I32), Weights: f.f32(6), Rows: 2, TopK: 3}
	if got, want := barriersOf(compile(t, b, r1, r2)), []int{0, -1, 0, -1, 1, -1, 1}; !slices.Equal(got, want) {
		t.Errorf("two routers: %v, want %v", got, want)
	}
	// lin1 writes y1; an empty op reads y1 and writes y2; norm2 reads y1
	// (through its delta): it must still wait for lin1
	empty := &backend.AddRMSNorm{H: y2, Delta: y1.View(0, 0), Weight: f.f32(9), Out: y2, Rows: 0, Dim: 9}
	if got, want := barriersOf(compile(t, b, lin1, empty, norm2)), []int{0, -1, 2}; !slices.Equal(got, want) {
		t.Errorf("a conflict across an op of no rows: %v, want %v", got, want)
	}
	// the conformance suite's decode step: every dispatch that reads what
	// an earlier one wrote has a barrier between them
	ops := everyOp(f, 1, backend.F32)
	p := compile(t, b, ops...)
	checkOrdered(t, p)
}

// checkOrdered: for every pair of conflicting ops, a barrier lies between
// their dispatches (an op fused into a step, between the step's).
func checkOrdered(t *testing.T, p *program) {
	t.Helper()
	last := map[int]int{}  // op: its last command
	first := map[int]int{} // op: its first command
	for i, c := range p.cmds {
		if c.Barrier {
			continue
		}
		op := p.opOf[i]
		if _, ok := first[op]; !ok {
			first[op] = i
		}
		last[op] = i
	}
	barrierBetween := func(a, b int) bool {
		for k := a + 1; k < b; k++ {
			if p.cmds[k].Barrier {
				return true
			}
		}
		return false
	}
	for j := range p.ops {
		for i := range j {
			si, sj := p.stepOf[i], p.stepOf[j]
			if si == sj {
				continue
			}
			if _, ok := last[si]; !ok {
				continue
			}
			if _, ok := first[sj]; !ok {
				continue
			}
			if len(backend.Dependencies([]backend.Op{p.ops[i], p.ops[j]})[1]) > 0 && !barrierBetween(last[si], first[sj]) {
				t.Errorf("ops %d (%s) and %d (%s) conflict with no barrier between them", i, backend.LabelOf(p.ops[i]), j, backend.LabelOf(p.ops[j]))
			}
		}
	}
}

// TestCommandLimits: a dispatch of more than 31 bindings, too many
// threads or an empty grid is refused before a device sees it.
func TestCommandLimits(t *testing.T) {
	m := &hostMem{b: make([]byte, 64)}
	args := func(n int) []dispatch.Arg { return slices.Repeat([]dispatch.Arg{{Mem: m}}, n) }
	ok := dispatch.Command{Kernel: entry{"ops", "k"}, Buffers: args(30), Params: []byte{1, 2, 3, 4}, Groups: dispatch.D1(1), Threads: dispatch.D1(1024)}
	if err := ok.Check(); err != nil {
		t.Errorf("30 buffers and a parameter struct: %v", err)
	}
	for name, c := range map[string]dispatch.Command{
		"31 buffers and parameters": {Kernel: ok.Kernel, Buffers: args(31), Params: []byte{1}, Groups: ok.Groups, Threads: ok.Threads},
		"32 buffers":                {Kernel: ok.Kernel, Buffers: args(32), Groups: ok.Groups, Threads: ok.Threads},
		"1025 threads":              {Kernel: ok.Kernel, Buffers: args(1), Groups: ok.Groups, Threads: dispatch.D2(1025, 1)},
		"an empty grid":             {Kernel: ok.Kernel, Buffers: args(1), Groups: dispatch.D2(1, 0), Threads: ok.Threads},
		"an offset past the end":    {Kernel: ok.Kernel, Buffers: []dispatch.Arg{{Mem: m, Off: 64}}, Groups: ok.Groups, Threads: ok.Threads},
		"no kernel":                 {Buffers: args(1), Groups: ok.Groups, Threads: ok.Threads},
	} {
		if err := c.Check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestLoweringChecks: an op over buffers of the wrong type or length, or a
// matrix of another backend, fails to compile with an error that names it.
func TestLoweringChecks(t *testing.T) {
	b, _ := newRecorded(t, DefaultOptions())
	f := fixture{t, b, rand.New(rand.NewPCG(5, 5))}
	other, _ := newRecorded(t, DefaultOptions())
	foreign := fixture{t, other, f.rng}.mat(1, 67, 192, 4)
	for _, c := range []struct {
		op   backend.Op
		want string
	}{
		{&backend.QLinear{X: f.f32(100), W: f.mat(1, 67, 192, 4), Y: f.f32(67), Rows: 1}, "x has 100 elements, the op needs 192"},
		{&backend.QLinear{X: f.buf(192, backend.BF16), W: f.mat(1, 67, 192, 4), Y: f.f32(67), Rows: 1}, "x is a bf16 buffer"},
		{&backend.QLinear{X: f.f32(192), W: foreign, Y: f.f32(67), Rows: 1}, "not uploaded to this backend"},
		{&backend.ConvSiLU{X: f.f32(10), State: f.f32(170), Weight: f.f32(180), Out: f.f32(10), Rows: 1, Chans: 10, K: 18}, "a conv of width 18"},
		{&backend.Attention{Q: f.f32(6 * 600), QG: f.f32(6 * 1200), KCache: f.f32(1200), VCache: f.f32(1200), Out: f.f32(6 * 600),
			Pos: f.buf(1, backend.I32), Rows: 1, QHeads: 6, KVHeads: 2, HeadDim: 600}, "heads of 600 values"},
		{&backend.Advance{Pos: f.f32(1), By: 1}, "the position is a f32 buffer"},
	} {
		_, err := b.Compile([]backend.Op{c.op})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.op.Name(), err, c.want)
		}
	}
}

// TestHostCopies: Write and Read round through each element type as
// backend.Round does; a Copy of one type is a device copy, between float
// types a convert dispatch with its codes.
func TestHostCopies(t *testing.T) {
	b, r := newRecorded(t, DefaultOptions())
	vals := []float32{1, -2.5, 1.0 / 3, 65504, 1e-6, float32(math.Inf(-1))}
	for _, ty := range []backend.DType{backend.F32, backend.BF16, backend.F16} {
		buf, err := backend.AllocFloats(b, ty, vals)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(vals))
		if err := b.Read(buf, got); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if want := backend.Round(ty, v); got[i] != want {
				t.Errorf("%s: %g read back as %g, want %g", ty, v, got[i], want)
			}
		}
	}
	ints, _ := backend.AllocInts(b, []int32{1, -7, 1 << 30})
	dst, _ := b.Alloc(3, backend.I32)
	if err := b.Copy(dst, ints); err != nil {
		t.Fatal(err)
	}
	got := make([]int32, 3)
	if err := b.ReadInts(dst, got); err != nil || !slices.Equal(got, []int32{1, -7, 1 << 30}) {
		t.Errorf("int copy: %v %v", got, err)
	}
	if len(r.submitted) != 0 {
		t.Errorf("a copy of one type dispatched %d command buffers", len(r.submitted))
	}
	src, _ := backend.AllocFloats(b, backend.F32, vals)
	half, _ := b.Alloc(len(vals), backend.BF16)
	if err := b.Copy(half, src); err != nil {
		t.Fatal(err)
	}
	if len(r.submitted) != 1 || r.submitted[0][0].Kernel.Name() != "convert" {
		t.Fatalf("a copy from f32 to bf16: %v", r.submitted)
	}
	if p := paramsOf[kernels.ConvertParams](t, r.submitted[0][0]); p != (kernels.ConvertParams{N: uint32(len(vals)), From: 0, To: 1}) {
		t.Errorf("convert parameters %+v", p)
	}
	if err := b.Write(ints, vals[:3]); err == nil {
		t.Error("float values written into an i32 buffer")
	}
}

// TestUploadLayout: a matrix's codes, scales and biases go up as they
// are, 4-bit matrices in groups of 64 also get the interleaved scale/bias
// words, and the QShape table is the matrix's shape.
func TestUploadLayout(t *testing.T) {
	b, _ := newRecorded(t, DefaultOptions())
	rng := rand.New(rand.NewPCG(6, 6))
	for _, bits := range []int{4, 8} {
		m := quant.RandomMatrix(rng, 3, 5, 128, bits, 64)
		up, err := b.Upload(m)
		if err != nil {
			t.Fatal(err)
		}
		w := up.(*matrix)
		if w.Shape().Words != nil || w.Shape().Rows != 5 || w.Shape().Experts != 3 {
			t.Errorf("%d-bit: shape %+v", bits, w.Shape())
		}
		read := func(a dispatch.Arg, n int) []byte {
			raw, err := at(a, n)
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}
		if !bytes.Equal(read(w.words, 4*len(m.Words)), bytesOf(m.Words)) || !bytes.Equal(read(w.scales, 2*len(m.Scales)), bytesOf(m.Scales)) ||
			!bytes.Equal(read(w.biases, 2*len(m.Biases)), bytesOf(m.Biases)) {
			t.Errorf("%d-bit: the codes, scales or biases differ from the matrix's", bits)
		}
		if (w.sb != nil) != (bits == 4) {
			t.Errorf("%d-bit: interleaved words %v", bits, w.sb != nil)
		}
		if w.sb != nil {
			sb := read(dispatch.Arg{Mem: w.sb}, 4*len(m.Scales))
			for i := range m.Scales {
				if v := binary.LittleEndian.Uint32(sb[4*i:]); v != uint32(m.Scales[i])|uint32(m.Biases[i])<<16 {
					t.Fatalf("interleaved word %d: %#x", i, v)
				}
			}
		}
		want := kernels.QShape{Rows: 15, Cols: 128, Bits: int32(bits), Group: 64, Wpr: int32(128 * bits / 32), Gpr: 2}
		if !bytes.Equal(read(dispatch.Arg{Mem: w.table}, 24), params(want)) {
			t.Errorf("%d-bit: QShape %x, want %+v", bits, read(dispatch.Arg{Mem: w.table}, 24), want)
		}
	}
}

func TestParseOptions(t *testing.T) {
	o, err := ParseOptions([]backend.Option{{Key: "fused", Value: "off"}, {Key: "kv", Value: "bf16"}, {Key: "sync", Value: "op"}})
	if err != nil || o.Fused || o.KV != backend.BF16 || !o.SyncEach {
		t.Errorf("fused=off,kv=bf16,sync=op: %+v %v", o, err)
	}
	for _, bad := range []backend.Option{{Key: "kv", Value: "f16"}, {Key: "fused", Value: "maybe"}, {Key: "graphs", Value: "on"}} {
		if _, err := ParseOptions([]backend.Option{bad}); err == nil || !strings.Contains(err.Error(), bad.Key) {
			t.Errorf("%s=%s: %v", bad.Key, bad.Value, err)
		}
	}
}
