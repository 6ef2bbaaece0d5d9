package cuda

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"petal/engine/backend"
	"petal/engine/backend/backendtest"
	"petal/engine/cuda/kernels"
)

// deltaChunkBar is the chunked delta rule's bar (largest error over the
// RMS of the float64 reference, for outputs and state): 2.5x the
// sequential kernel's 2e-5, as its products take each float32 operand as
// two tf32 parts (about 2^-21 relative) where the sequential kernel has
// float32 FMA. On the H200 the outputs' error stays under 1.3e-5 and the
// state's under 2.1e-6 from 16 to 4096 tokens (the one-pass kernel before
// it, in bf16 parts, needed 2e-4); a bf16 rounding of the same outputs
// would be 2e-3.
const deltaChunkBar = 5e-5

// TestDeltaOption: delta=tf32|tf32frag|chunked|sequential parse, tf32frag
// is the default, a bad value is named, and the help says which is the
// default.
func TestDeltaOption(t *testing.T) {
	if o, err := ParseOptions([]backend.Option{{Key: "delta", Value: "chunked"}}); err != nil || !o.ChunkedDelta || o.DeltaTF32 {
		t.Errorf("delta=chunked: %+v, %v", o, err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "delta", Value: "sequential"}}); err != nil || o.ChunkedDelta || o.DeltaTF32 {
		t.Errorf("delta=sequential: %+v, %v", o, err)
	}
	if !DefaultOptions().ChunkedDelta {
		t.Error("the default is the sequential delta rule, not the chunked one")
	}
	if _, err := ParseOptions([]backend.Option{{Key: "delta", Value: "blocked"}}); err == nil || !strings.Contains(err.Error(), "delta") {
		t.Errorf("delta=blocked: error %v, want one naming delta", err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "delta", Value: "tf32"}}); err != nil || !o.ChunkedDelta || !o.DeltaTF32 || o.DeltaFrag {
		t.Errorf("delta=tf32: %+v, %v", o, err)
	}
	if !DefaultOptions().DeltaTF32 {
		t.Error("the default takes the three-product state pass, not the one-product one")
	}
	if o, err := ParseOptions([]backend.Option{{Key: "delta", Value: "tf32frag"}}); err != nil || !o.ChunkedDelta || !o.DeltaTF32 || !o.DeltaFrag {
		t.Errorf("delta=tf32frag: %+v, %v", o, err)
	}
	if !DefaultOptions().DeltaFrag {
		t.Error("the default is delta=tf32's workspace, not tf32frag's fragment order")
	}
	if !strings.Contains(OptionsHelp, "delta=tf32|tf32frag|chunked|sequential") || !strings.Contains(OptionsHelp, "default tf32frag)") {
		t.Errorf("the help does not describe delta: %s", OptionsHelp)
	}
}

// TestDeltaChunkKernelMatchesLauncher: the constants the launcher uses
// are those gdn_chunk.cu is built with, its PTX has the entry points and
// calls no function, and the shared memory fits an H100/H200.
func TestDeltaChunkKernelMatchesLauncher(t *testing.T) {
	src, err := os.ReadFile("kernels/gdn_chunk.cu")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"GC_D": GDNHeadDim, "GC_C": deltaChunkTokens, "GC_VT": deltaChunkSlice, "GC_WS": deltaChunkWS,
		"GC_PREP_THREADS": deltaChunkPrepThreads, "GC_STATE_THREADS": deltaChunkStateThreads} {
		m := regexp.MustCompile(`(?m)^#define ` + name + ` (\d+)$`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("gdn_chunk.cu does not define %s", name)
		}
		if n, _ := strconv.Atoi(string(m[1])); n != want {
			t.Errorf("gdn_chunk.cu has %s %d, the launcher %d", name, n, want)
		}
	}
	ptx, err := kernels.PTX("gdn_chunk")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{deltaChunkPrepName, deltaChunkStateName, deltaChunkStateILPName, deltaChunkStateSKName} {
		if !bytes.Contains(ptx, []byte(".visible .entry "+name+"(")) {
			t.Errorf("no entry point %s in the PTX", name)
		}
	}
	if bytes.Contains(ptx, []byte("call.uni")) || bytes.Contains(ptx, []byte(".extern .func")) {
		t.Error("the PTX calls a function (an unresolved external for the driver)")
	}
	tf32, err := kernels.PTX("gdn_chunk_tf32")
	if err != nil {
		t.Fatal(err)
	}
	for name := range deltaTF32Kernels {
		if !bytes.Contains(tf32, []byte(".visible .entry "+name+"(")) {
			t.Errorf("no entry point %s in gdn_chunk_tf32's PTX", name)
		}
	}
	// no prep of its own (gdn_chunk.ptx's is launched)
	if bytes.Contains(tf32, []byte(".entry "+deltaChunkPrepName+"(")) || bytes.Contains(tf32, []byte("call.uni")) {
		t.Error("gdn_chunk_tf32's PTX has a prep of its own or calls a function")
	}
	frag, err := kernels.PTX("gdn_chunk_frag")
	if err != nil {
		t.Fatal(err)
	}
	for name := range mergedKernels(deltaFragKernels, map[string]func() int{deltaChunkFragPrepName: nil}) {
		if !bytes.Contains(frag, []byte(".visible .entry "+name+"(")) {
			t.Errorf("no entry point %s in gdn_chunk_frag's PTX", name)
		}
	}
	if bytes.Contains(frag, []byte(".entry "+deltaChunkPrepName+"(")) || bytes.Contains(frag, []byte("call.uni")) {
		t.Error("gdn_chunk_frag's PTX has gdn_chunk.ptx's prep or calls a function")
	}
	if _, ok := deltaFragKernels[deltaFragKernel]; !ok {
		t.Errorf("delta=tf32frag's state kernel %s is not one of deltaFragKernels", deltaFragKernel)
	}
	if _, ok := deltaTF32Kernels[deltaTF32Kernel]; !ok {
		t.Errorf("delta=tf32's state kernel %s is not one of deltaTF32Kernels", deltaTF32Kernel)
	}
	if s := deltaChunkPrepShared(); s > 48<<10 {
		t.Errorf("gdn_chunk_prep's shared memory %d bytes: more than 48 KB leaves fewer blocks per multiprocessor", s)
	}
	onlyEntries(t, "gdn_chunk_flow", deltaChunkFlowPrepName, deltaChunkFlowStateName)
	onlyEntries(t, "gdn_chunk_pair", deltaChunkPairPrepName)
	onlyEntries(t, "gdn_chunk_pairflow", deltaChunkPairFlowPrepName)
	if s := deltaChunkPairShared(); 2*s > 227<<10 {
		t.Errorf("gdn_chunk_prep_pair's shared memory %d bytes: two blocks a multiprocessor do not fit", s)
	}
	for name, size := range mergedKernels(deltaStateKernels, deltaTF32Kernels, deltaFragKernels) {
		if s := size(); s <= 48<<10 || s > 227<<10 {
			t.Errorf("%s's shared memory %d bytes: the launcher opts in above 48 KB, an H100/H200 allows 227 KB", name, s)
		}
	}
	if _, ok := deltaStateKernels[deltaStateKernel]; !ok {
		t.Errorf("the state kernel %s is not one of deltaStateKernels", deltaStateKernel)
	}
	if got, want := deltaChunkWorkspace(&backend.DeltaRule{Rows: 512, ValueHeads: 32}), int64(4*deltaChunkWS*32*16); got != want {
		t.Errorf("the workspace of 512 rows and 32 value heads is %d bytes, want %d", got, want)
	}
}

// deltaCase is one DeltaRule op on the device with its host inputs; Out
// and State are views of buffers with poisoned guards after them.
type deltaCase struct {
	o                                *backend.DeltaRule
	qkv, bb, aa, aLog, dtBias, state []float32
	outAll, stateAll                 backend.Buffer
}

const deltaGuard = 64

func newDeltaCase(b *Backend, rng *rand.Rand, rows, Hk, Hv int) *deltaCase {
	D := GDNHeadDim
	c := &deltaCase{
		qkv: randoms(rng, rows*(2*Hk+Hv)*D, 1), bb: randoms(rng, rows*Hv, 2), aa: randoms(rng, rows*Hv, 2),
		aLog: make([]float32, Hv), dtBias: randoms(rng, Hv, 0.5), state: randoms(rng, Hv*D*D, 0.1),
	}
	for i := range c.aLog {
		c.aLog[i] = float32(math.Log(1 + 15*rng.Float64()))
	}
	c.outAll = floats(b, nans(rows*Hv*D+deltaGuard))
	c.stateAll = floats(b, append(slices.Clone(c.state), nans(deltaGuard)...))
	c.o = &backend.DeltaRule{QKV: floats(b, c.qkv), B: floats(b, c.bb), A: floats(b, c.aa), ALog: floats(b, c.aLog),
		DtBias: floats(b, c.dtBias), State: c.stateAll.View(0, Hv*D*D), Out: c.outAll.View(0, rows*Hv*D), Rows: rows,
		KeyHeads: Hk, KeyDim: D, ValueHeads: Hv, ValueDim: D}
	return c
}

// readGuarded reads buf's first n elements, failing if one after them was written.
func readGuarded(t *testing.T, b *Backend, buf backend.Buffer, n int, what string) []float32 {
	t.Helper()
	v := read(t, b, buf)
	for i := n; i < len(v); i++ {
		if !math.IsNaN(float64(v[i])) {
			t.Fatalf("%s: element %d, past the %d written, is %v", what, i, n, v[i])
		}
	}
	return v[:n]
}

// onlyEntries fails unless family's PTX has exactly the entry points
// names and calls no function.
func onlyEntries(t *testing.T, family string, names ...string) {
	t.Helper()
	ptx, err := kernels.PTX(family)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !bytes.Contains(ptx, []byte(".visible .entry "+name+"(")) {
			t.Errorf("no entry point %s in %s's PTX", name, family)
		}
	}
	if n := bytes.Count(ptx, []byte(".visible .entry ")); n != len(names) || bytes.Contains(ptx, []byte("call.uni")) {
		t.Errorf("%s's PTX has %d entry points, want %d, or calls a function", family, n, len(names))
	}
}

// TestChunkedDeltaRuleMatchesReference: gdn_chunk over 16 to 512 tokens
// (inside one block, across blocks, several blocks) from a
// random state against the float64 reference, outputs and final state, on
// the 35B head counts and an odd grouping, with graphs on and off, each
// state kernel of deltaStateKernels.
func TestChunkedDeltaRuleMatchesReference(t *testing.T) {
	defer func(v string) { deltaStateKernel = v }(deltaStateKernel)
	for _, form := range deltaForms(true) {
		graphs := form.graphs
		deltaStateKernel = form.state
		o := DefaultOptions()
		o.ChunkedDelta, o.DeltaTF32, o.Graphs = true, false, graphs
		b := testBackend(t, o)
		for _, sh := range []gdnShape{{"35B 16k/32v heads", 16, 32}, {"3k/9v heads", 3, 9}} {
			for _, rows := range []int{16, 31, 33, 100, 512} {
				t.Run(fmt.Sprintf("%s %d rows graphs=%v %s", sh.name, rows, graphs, form.state), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(rows), uint64(sh.hv)))
					c := newDeltaCase(b, rng, rows, sh.hk, sh.hv)
					p, err := b.Compile([]backend.Op{c.o})
					if err != nil {
						t.Fatal(err)
					}
					checkChunkedDelta(t, b, p, c)
				})
			}
		}
	}
}

// checkChunkedDelta runs p, c's op compiled to the two chunked kernels,
// and checks its outputs and state against the float64 reference.
func checkChunkedDelta(t *testing.T, b *Backend, p backend.Program, c *deltaCase) {
	t.Helper()
	checkChunkedDeltaForm(t, b, p, c, deltaStateKernel, deltaChunkBar)
}

// checkChunkedDeltaForm is checkChunkedDelta for the state kernel kernel
// held to bar.
func checkChunkedDeltaForm(t *testing.T, b *Backend, p backend.Program, c *deltaCase, kernel string, bar float64) {
	t.Helper()
	want := deltaChunkPrepName + "+" + kernel
	if strings.Contains(kernel, "+") { // a prep of its own
		want = kernel
	}
	if got := p.(*program).kernelNames()[0]; !slices.Equal(got, []string{want}) {
		t.Fatalf("kernels %v, want %s", got, want)
	}
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	o := c.o
	state := slices.Clone(c.state)
	ref := backendtest.DeltaRule(c.qkv, c.bb, c.aa, c.aLog, c.dtBias, state, o.Rows, o.KeyHeads, GDNHeadDim, o.ValueHeads, GDNHeadDim)
	withinBar(t, "out", readGuarded(t, b, c.outAll, len(ref), "out"), ref, bar)
	withinBar(t, "state", readGuarded(t, b, c.stateAll, len(state), "state"), widen64(state), bar)
}

// checkDeltaLengths runs checkChunkedDeltaForm on b, the state kernel
// kernel held to bar, from fresh inputs on the 35B head counts and an odd
// grouping at each length of rows (4096 on the 35B counts alone), each a
// subtest named by its shape, length and suffix.
func checkDeltaLengths(t *testing.T, b *Backend, rows []int, suffix, kernel string, bar float64) {
	for _, sh := range []gdnShape{{"35B 16k/32v heads", 16, 32}, {"3k/9v heads", 3, 9}} {
		for _, n := range rows {
			if n == 4096 && sh.hk != 16 {
				continue
			}
			t.Run(fmt.Sprintf("%s %d rows %s", sh.name, n, suffix), func(t *testing.T) {
				c := newDeltaCase(b, rand.New(rand.NewPCG(uint64(n), uint64(sh.hv))), n, sh.hk, sh.hv)
				p, err := b.Compile([]backend.Op{c.o})
				if err != nil {
					t.Fatal(err)
				}
				checkChunkedDeltaForm(t, b, p, c, kernel, bar)
			})
		}
	}
}

// TestChunkedDeltaTF32MatchesReference: delta=tf32 takes gdn_chunk_prep
// and the one-product state kernel, each of deltaTF32Kernels, and holds
// deltaTF32Bar against the float64 reference over the shapes and lengths
// of the float32-accurate form's tests, 4096 tokens among them.
func TestChunkedDeltaTF32MatchesReference(t *testing.T) {
	defer func(v string) { deltaTF32Kernel = v }(deltaTF32Kernel)
	for _, name := range slices.Sorted(maps.Keys(deltaTF32Kernels)) {
		deltaTF32Kernel = name
		o := DefaultOptions()
		o.ChunkedDelta, o.DeltaTF32 = true, true
		checkDeltaLengths(t, testBackend(t, o), []int{16, 33, 512, 4096}, name, name, deltaTF32Bar)
	}
}

// TestChunkedDeltaFragMatchesTF32: delta=tf32frag (gdn_chunk_frag.cu: the
// prep writing the workspace in the tensor cores' fragment order) gives
// the bits of delta=tf32, state kernel against state kernel of the same
// tiles (gdn_chunk_state_frag against _tf32, _frag_sk against _tf32_sk),
// outputs and state, from the same inputs (poisoned outputs first) at the
// 35B and an odd head grouping up to 4096 tokens; and holds deltaTF32Bar
// against the float64 reference.
func TestChunkedDeltaFragMatchesTF32(t *testing.T) {
	defer func(v, w string) { deltaFragKernel, deltaTF32Kernel = v, w }(deltaFragKernel, deltaTF32Kernel)
	pairs := [][2]string{{deltaChunkFragStateName, deltaChunkStateTF32Name}, {deltaChunkFragStateSKName, deltaChunkStateTF32SKName}}
	for _, pair := range pairs {
		deltaFragKernel, deltaTF32Kernel = pair[0], pair[1]
		of, ot := DefaultOptions(), DefaultOptions()
		of.ChunkedDelta, of.DeltaTF32, of.DeltaFrag, of.DeltaPair = true, true, true, false
		ot.ChunkedDelta, ot.DeltaTF32, ot.DeltaFrag = true, true, false
		bf, bt := testBackend(t, of), testBackend(t, ot)
		checkDeltaLengths(t, bf, []int{16, 33, 512, 4096}, pair[0], deltaChunkFragPrepName+"+"+pair[0], deltaTF32Bar)
		for _, sh := range []gdnShape{{"35B 16k/32v heads", 16, 32}, {"3k/9v heads", 3, 9}} {
			for _, n := range []int{16, 33, 100, 512, 4096} {
				if n == 4096 && sh.hk != 16 {
					continue
				}
				t.Run(fmt.Sprintf("%s %d rows %s against %s", sh.name, n, pair[0], pair[1]), func(t *testing.T) {
					outs, states := deltaRunBoth(t, [2]*Backend{bf, bt}, sh, n, uint64(sh.hv)+99, 1, [2]string{})
					sameDeltaBits(t, outs, states, [2]string{"tf32frag", "tf32"})
				})
			}
		}
	}
}

// TestChunkedDeltaPairMatchesFrag: deltapair=on (gdn_chunk_pair.cu: the
// prep a block for two value heads of a key head) gives gdn_chunk_prep_frag's
// workspace, so delta=tf32frag's bits, outputs and state, over two runs of
// the same program, with graphs on and off, from the same inputs at the
// 35B grouping (2 value heads a key head) and at 4 a key head, up to 4096
// tokens; at 3 a key head the prep stays gdn_chunk_prep_frag.
func TestChunkedDeltaPairMatchesFrag(t *testing.T) {
	for _, graphs := range []bool{true, false} {
		of, op := DefaultOptions(), DefaultOptions()
		of.Graphs, op.Graphs, op.DeltaPair = graphs, graphs, true
		bf, bp := testBackend(t, of), testBackend(t, op)
		for _, sh := range []gdnShape{{"35B 16k/32v heads", 16, 32}, {"2k/8v heads", 2, 8}, {"3k/9v heads", 3, 9}} {
			for _, n := range []int{16, 33, 100, 512, 4096} {
				if n == 4096 && sh.hk != 16 {
					continue
				}
				t.Run(fmt.Sprintf("%s %d rows graphs=%v", sh.name, n, graphs), func(t *testing.T) {
					frag := deltaChunkFragPrepName + "+" + deltaChunkFragStateName
					want := deltaChunkPairPrepName + "+" + deltaChunkFragStateName
					if sh.hv/sh.hk%2 != 0 {
						want = frag
					}
					outs, states := deltaRunBoth(t, [2]*Backend{bp, bf}, sh, n, uint64(sh.hv)+11, 2, [2]string{want, frag})
					sameDeltaBits(t, outs, states, [2]string{"deltapair=on", "deltapair=off"})
				})
			}
		}
	}
}

// TestChunkedDeltaFlowMatchesFrag: deltaflow=on (gdn_chunk_flow.cu: the
// prep and the state pass at once, each block of tokens handed over by a
// flag) gives the bits of gdn_chunk_state_frag (so of delta=tf32's
// gdn_chunk_state_tf32), outputs and state, over two runs of the same
// program (the second from the first's state, a graph replay under
// graphs=on, whose flags must have come back to zero), with graphs on and
// off and with pdl=off (the prep finishing before the state pass starts),
// from the same inputs at the 35B and an odd head grouping up to 4096
// tokens; and leaves every flag at zero.
func TestChunkedDeltaFlowMatchesFrag(t *testing.T) {
	for _, form := range []struct{ graphs, pdl, pair bool }{{true, true, false}, {false, true, false}, {true, false, false}, {true, true, true}, {false, true, true}} {
		graphs := form.graphs
		of, ow := DefaultOptions(), DefaultOptions()
		of.Graphs, ow.Graphs, ow.DeltaFlow, ow.PDL, ow.DeltaFlowPair = graphs, graphs, true, form.pdl, form.pair
		of.DeltaPair = false // gdn_chunk_prep_frag, the prep the flow forms are made of
		bf, bw := testBackend(t, of), testBackend(t, ow)
		for _, sh := range []gdnShape{{"35B 16k/32v heads", 16, 32}, {"2k/8v heads", 2, 8}, {"3k/9v heads", 3, 9}} {
			for _, n := range []int{16, 33, 100, 512, 4096} {
				if n == 4096 && sh.hk != 16 || sh.hk == 2 && !form.pair {
					continue
				}
				t.Run(fmt.Sprintf("%s %d rows graphs=%v pdl=%v pair=%v", sh.name, n, graphs, form.pdl, form.pair), func(t *testing.T) {
					flow := deltaChunkFlowPrepName + "+" + deltaChunkFlowStateName
					if form.pair && sh.hv/sh.hk%2 == 0 {
						flow = deltaChunkPairFlowPrepName + "+" + deltaChunkFlowStateName
					}
					outs, states := deltaRunBoth(t, [2]*Backend{bw, bf}, sh, n, uint64(sh.hv)+7, 2, [2]string{
						flow, deltaChunkFragPrepName + "+" + deltaChunkFragStateName})
					sameDeltaBits(t, outs, states, [2]string{"deltaflow=on", "deltaflow=off"})
					flags := make([]byte, bw.deltaFlags.bytes)
					if err := bw.s.CopyToHost(flags, bw.deltaFlags.p); err != nil {
						t.Fatal(err)
					}
					if err := bw.s.Sync(); err != nil {
						t.Fatal(err)
					}
					for i, v := range flags {
						if v != 0 {
							t.Fatalf("flag byte %d is %d after the runs, want 0", i, v)
						}
					}
				})
			}
		}
	}
}

// deltaRunBoth runs one DeltaRule op of n rows at shape sh on each of bs
// in turn, from the same inputs (seed), runs times over, and returns each
// one's outputs and state; where want names a backend's kernel step, its
// program must have that one.
func deltaRunBoth(t *testing.T, bs [2]*Backend, sh gdnShape, n int, seed uint64, runs int, want [2]string) (outs, states [2][]float32) {
	t.Helper()
	for i, b := range bs {
		c := newDeltaCase(b, rand.New(rand.NewPCG(uint64(n), seed)), n, sh.hk, sh.hv)
		p, err := b.Compile([]backend.Op{c.o})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.(*program).kernelNames()[0]; want[i] != "" && !slices.Equal(got, []string{want[i]}) {
			t.Fatalf("kernels %v, want %s", got, want[i])
		}
		for range runs {
			if err := p.Run(); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Sync(); err != nil {
			t.Fatal(err)
		}
		outs[i] = readGuarded(t, b, c.outAll, n*sh.hv*GDNHeadDim, "out")
		states[i] = readGuarded(t, b, c.stateAll, len(c.state), "state")
	}
	return outs, states
}

// sameDeltaBits fails at the first element of the outputs or the state
// whose bits differ between the two forms named.
func sameDeltaBits(t *testing.T, outs, states [2][]float32, forms [2]string) {
	t.Helper()
	for what, pair := range map[string][2][]float32{"out": outs, "state": states} {
		for j := range pair[0] {
			if math.Float32bits(pair[0][j]) != math.Float32bits(pair[1][j]) {
				t.Fatalf("%s element %d: %v with %s, %v with %s", what, j, pair[0][j], forms[0], pair[1][j], forms[1])
			}
		}
	}
}

// TestChunkedDeltaRuleLongPrefill: a chunk of 4096 tokens (--chunk 4096,
// 128 blocks of tokens, a 285 MB workspace) on the 35B head counts holds
// the same bar, and a second op of 512 rows compiled after it on the same
// backend (its workspace in the same scratch) does too; each state kernel.
func TestChunkedDeltaRuleLongPrefill(t *testing.T) {
	defer func(v string) { deltaStateKernel = v }(deltaStateKernel)
	for _, form := range deltaForms(false) {
		deltaStateKernel = form.state
		longPrefill(t)
	}
}

// deltaForm is a state kernel of deltaStateKernels, with graphs on or off.
type deltaForm struct {
	state  string
	graphs bool
}

// deltaForms lists every state kernel, in a fixed order, with graphs on
// (and off too with bothGraphs).
func deltaForms(bothGraphs bool) []deltaForm {
	var forms []deltaForm
	for _, name := range slices.Sorted(maps.Keys(deltaStateKernels)) {
		forms = append(forms, deltaForm{name, true})
		if bothGraphs {
			forms = append(forms, deltaForm{name, false})
		}
	}
	return forms
}

func longPrefill(t *testing.T) {
	o := DefaultOptions()
	o.ChunkedDelta, o.DeltaTF32 = true, false
	b := testBackend(t, o)
	for _, rows := range []int{4096, 512} {
		t.Run(fmt.Sprintf("%d rows %s", rows, deltaStateKernel), func(t *testing.T) {
			c := newDeltaCase(b, rand.New(rand.NewPCG(7, uint64(rows))), rows, 16, 32)
			p, err := b.Compile([]backend.Op{c.o})
			if err != nil {
				t.Fatal(err)
			}
			checkChunkedDelta(t, b, p, c)
		})
	}
}

// TestChunkedDeltaRuleFallsBack: heads other than 128 and fewer than
// deltaChunkMinRows tokens take the sequential kernel under delta=chunked, and delta=sequential never runs gdn_chunk.
func TestChunkedDeltaRuleFallsBack(t *testing.T) {
	o := DefaultOptions()
	o.ChunkedDelta = true
	b := testBackend(t, o)
	buf := func(n int) backend.Buffer { return floats(b, make([]float32, n)) }
	const Hk, Hv, Dk, Dv, rows = 2, 4, 24, 20, 5
	op := &backend.DeltaRule{QKV: buf(rows * (2*Hk*Dk + Hv*Dv)), B: buf(rows * Hv), A: buf(rows * Hv), ALog: buf(Hv), DtBias: buf(Hv),
		State: buf(Hv * Dv * Dk), Out: buf(rows * Hv * Dv), Rows: rows, KeyHeads: Hk, KeyDim: Dk, ValueHeads: Hv, ValueDim: Dv}
	p, err := b.Compile([]backend.Op{op})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.(*program).kernelNames()[0]; !slices.Equal(got, []string{"delta_rule"}) {
		t.Errorf("heads of %d under delta=chunked: kernels %v, want delta_rule", Dk, got)
	}
	for _, rows := range []int{1, deltaChunkMinRows - 1} {
		c := newDeltaCase(b, rand.New(rand.NewPCG(1, uint64(rows))), rows, 16, 32)
		p, err := b.Compile([]backend.Op{c.o})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.(*program).kernelNames()[0]; !slices.Equal(got, []string{"delta_rule"}) {
			t.Errorf("%d rows under delta=chunked: kernels %v, want delta_rule", rows, got)
		}
	}
	so := DefaultOptions()
	so.ChunkedDelta, so.DeltaTF32 = false, false
	seq := testBackend(t, so)
	c := newDeltaCase(seq, rand.New(rand.NewPCG(1, 2)), 64, 16, 32)
	p, err = seq.Compile([]backend.Op{c.o})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.(*program).kernelNames()[0]; !slices.Equal(got, []string{"delta_rule"}) {
		t.Errorf("delta=sequential: kernels %v, want delta_rule", got)
	}
}

// TestMeasureDeltaForms logs the time of one DeltaRule op on the 35B
// shapes (32 value heads, 16 key heads) sequential, then chunked with each
// state kernel of deltaStateKernels and deltaTF32Kernels, at 512 and 4096
// tokens (delta=tf32frag's with and without deltapair=on): the median of
// 5 runs after a warm-up.
func TestMeasureDeltaForms(t *testing.T) {
	defer func(v, w, x string) { deltaStateKernel, deltaTF32Kernel, deltaFragKernel = v, w, x }(deltaStateKernel, deltaTF32Kernel, deltaFragKernel)
	// a form: the options that choose its state kernel, state
	type form struct {
		chunked, tf32, frag bool
		state               string
		pair                bool // deltapair=on
	}
	forms := []form{{false, false, false, deltaStateKernel, false}}
	for _, f := range deltaForms(false) {
		forms = append(forms, form{true, false, false, f.state, false})
	}
	for _, name := range slices.Sorted(maps.Keys(deltaTF32Kernels)) {
		forms = append(forms, form{true, true, false, name, false})
	}
	for _, name := range slices.Sorted(maps.Keys(deltaFragKernels)) {
		forms = append(forms, form{true, true, true, name, false}, form{true, true, true, name, true})
	}
	forms = append(forms, form{true, true, true, deltaChunkFlowStateName, false}, form{true, true, true, deltaChunkFlowStateName, true})
	for _, f := range forms {
		switch {
		case f.frag:
			deltaFragKernel = f.state
		case f.tf32:
			deltaTF32Kernel = f.state
		default:
			deltaStateKernel = f.state
		}
		o := DefaultOptions()
		o.ChunkedDelta, o.DeltaTF32, o.DeltaFrag, o.DeltaPair = f.chunked, f.tf32, f.frag, f.pair
		if o.DeltaFlow = f.state == deltaChunkFlowStateName; o.DeltaFlow {
			o.DeltaPair, o.DeltaFlowPair = false, f.pair
			deltaFragKernel = deltaChunkFragStateName
		}
		b := testBackend(t, o)
		for _, rows := range []int{512, 4096} {
			c := newDeltaCase(b, rand.New(rand.NewPCG(3, uint64(rows))), rows, 16, 32)
			p, err := b.Compile([]backend.Op{c.o})
			if err != nil {
				t.Fatal(err)
			}
			var times []time.Duration
			for i := range 6 {
				start := time.Now()
				if err := p.Run(); err != nil {
					t.Fatal(err)
				}
				if err := b.Sync(); err != nil {
					t.Fatal(err)
				}
				if i > 0 {
					times = append(times, time.Since(start))
				}
			}
			slices.Sort(times)
			med := times[len(times)/2]
			t.Logf("delta rule, %v, %d tokens: %v (%.0f tokens/ms)", p.(*program).kernelNames()[0], rows, med, float64(rows)/float64(med.Microseconds())*1000)
		}
	}
}
