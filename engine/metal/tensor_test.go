package metal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"petal/engine/metal/dispatch"
)

// gemm=tensor as the lowering launches it: gemm_tensor.metal's entries
// where gemm=simd launches gemm.metal's GEMMs, with the same buffers,
// parameters, grids and threadgroups; the fallback to gemm=simd where the
// dispatcher has no tensor operations.

// tensorRecorder is a recorder whose device reports tensor operations
// (dispatch.TensorOps): err nil, it has them; else why it has not.
type tensorRecorder struct {
	*recorder
	err error
}

func (r tensorRecorder) TensorOps() error { return r.err }

// newTensorRecorded is a backend with options o over a tensorRecorder, and
// what it wrote to stderr at New.
func newTensorRecorded(t *testing.T, o Options, err error) (*Backend, string) {
	t.Helper()
	var msg bytes.Buffer
	old := stderr
	stderr = &msg
	defer func() { stderr = old }()
	b, e := New(tensorRecorder{&recorder{}, err}, o)
	if e != nil {
		t.Fatal(e)
	}
	return b, msg.String()
}

// tensorName is gemm=tensor's entry for gemm=simd's entry name.
func tensorName(name string) string {
	switch name {
	case "gemm_dense_f32", "gemm_dense_bf16", "gemm_gateup", "gemm_down":
		return "gemm_tensor_" + strings.TrimPrefix(name, "gemm_")
	}
	return name
}

// TestTensorGEMMChoice: at the 35B model's shapes and the tiny oracle
// model's, over 100 rows, gemm=tensor on a device with tensor operations
// launches exactly gemm=simd's program with each GEMM (dense, gate/up,
// down) on its gemm_tensor.metal sibling: the same dispatches in the same
// order, barriers, grids, threadgroups, parameter bytes and bindings (by
// offset), the grouping, SwiGLU and combine still gemm.metal's; every
// dispatch matches its kernel's source. Nothing is said on stderr.
func TestTensorGEMMChoice(t *testing.T) {
	const rows = 100
	sc := newSourceCheck()
	for _, sh := range []decodeShape{shape35B, shapeTiny} {
		so := DefaultOptions()
		so.SimdGEMM = true
		sb, _ := newRecorded(t, so)
		simd := compile(t, sb, prefillOps(fixture{t, sb, rand.New(rand.NewPCG(9, 9))}, sh, rows)...)

		to := DefaultOptions()
		to.TensorGEMM = true
		tb, msg := newTensorRecorded(t, to, nil)
		if msg != "" {
			t.Errorf("%s: stderr %q with tensor operations present", sh.name, msg)
		}
		if o := tb.Options(); !o.TensorGEMM || !o.SimdGEMM {
			t.Fatalf("%s: options %+v after New", sh.name, o)
		}
		tp := compile(t, tb, prefillOps(fixture{t, tb, rand.New(rand.NewPCG(9, 9))}, sh, rows)...)
		sc.program(t, tp, sh.name+" gemm=tensor")
		checkOrdered(t, tp)

		if len(tp.cmds) != len(simd.cmds) {
			t.Fatalf("%s: %d commands, gemm=simd has %d", sh.name, len(tp.cmds), len(simd.cmds))
		}
		tensorEntries := 0
		for i, c := range tp.cmds {
			s := simd.cmds[i]
			if c.Barrier != s.Barrier {
				t.Fatalf("%s: command %d: barrier %v, gemm=simd's %v", sh.name, i, c.Barrier, s.Barrier)
			}
			if c.Barrier {
				continue
			}
			e, se := c.Kernel.(entry), s.Kernel.(entry)
			wantFamily := se.family
			if tensorName(se.name) != se.name {
				wantFamily = "gemm_tensor"
				tensorEntries++
			}
			label := fmt.Sprintf("%s: command %d (%s)", sh.name, i, se.name)
			if e.family != wantFamily || e.name != tensorName(se.name) {
				t.Errorf("%s: %s.%s, want %s.%s", label, e.family, e.name, wantFamily, tensorName(se.name))
			}
			if c.Groups != s.Groups || c.Threads != s.Threads || !bytes.Equal(c.Params, s.Params) {
				t.Errorf("%s: %v %v %x, gemm=simd's %v %v %x", label, c.Groups, c.Threads, c.Params, s.Groups, s.Threads, s.Params)
			}
			offs := func(as []dispatch.Arg) (o []int64) {
				for _, a := range as {
					o = append(o, a.Off)
				}
				return o
			}
			if !slices.Equal(offs(c.Buffers), offs(s.Buffers)) {
				t.Errorf("%s: bindings at %v, gemm=simd's at %v", label, offs(c.Buffers), offs(s.Buffers))
			}
		}
		// the 4-bit QLinear, the group's 4-bit matrix, and the experts' shared
		// gate, up and down with the grouped gate/up and down
		if tensorEntries != 7 {
			t.Errorf("%s: %d dispatches on gemm_tensor.metal, want 7", sh.name, tensorEntries)
		}
	}
	for _, e := range []string{"gemm_tensor.gemm_tensor_dense_f32", "gemm_tensor.gemm_tensor_dense_bf16", "gemm_tensor.gemm_tensor_gateup", "gemm_tensor.gemm_tensor_down", "gemm.moe_route", "gemm.moe_combine"} {
		if !slices.Contains(sc.entries(), e) {
			t.Errorf("no dispatch of %s: %v", e, sc.entries())
		}
	}
}

// TestTensorGEMMFallback: gemm=tensor on a dispatcher without tensor
// operations (none declared, or the device's check failing) says so on
// stderr, naming the reason, and lowers exactly as gemm=simd: gemm.metal's
// GEMMs, nothing of gemm_tensor.metal.
func TestTensorGEMMFallback(t *testing.T) {
	o := DefaultOptions()
	o.TensorGEMM = true
	var msg bytes.Buffer
	old := stderr
	stderr = &msg
	b, err := New(&recorder{}, o)
	stderr = old
	if err != nil {
		t.Fatal(err)
	}
	nb, nmsg := newTensorRecorded(t, o, fmt.Errorf("Apple M4 Max (Apple GPU family 9): no neural accelerators (an Apple10 GPU)"))
	for _, c := range []struct {
		what, msg, why string
		b              *Backend
	}{{"no TensorOps", msg.String(), "has no tensor operations", b}, {"TensorOps failing", nmsg, "no neural accelerators", nb}} {
		if !strings.Contains(c.msg, "gemm=tensor") || !strings.Contains(c.msg, c.why) || !strings.Contains(c.msg, "gemm=simd") || strings.Count(c.msg, "\n") != 1 {
			t.Errorf("%s: stderr %q, want one line naming gemm=tensor, %q and the fallback to gemm=simd", c.what, c.msg, c.why)
		}
		if o := c.b.Options(); o.TensorGEMM || !o.SimdGEMM {
			t.Errorf("%s: options %+v, want gemm=simd's", c.what, o)
		}
		p := compile(t, c.b, prefillOps(fixture{t, c.b, rand.New(rand.NewPCG(9, 9))}, shapeTiny, 100)...)
		got := launched(p)
		if s := fmt.Sprint(got); strings.Contains(s, "gemm_tensor") || !strings.Contains(s, "gemm_gateup") || !strings.Contains(s, "gemm_dense_f32") {
			t.Errorf("%s: %v", c.what, got)
		}
	}
	// gemm=simd and gemm=plain never ask
	for _, o := range []Options{DefaultOptions(), {Fused: true, SimdGEMM: true}} {
		if _, m := newTensorRecorded(t, o, fmt.Errorf("asked")); m != "" {
			t.Errorf("%+v: stderr %q", o, m)
		}
	}
}
