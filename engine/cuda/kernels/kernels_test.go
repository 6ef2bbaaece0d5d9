package kernels

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEmbeddedPTX: every family's PTX is embedded, targets sm_90, ends in
// NUL, and defines the entry points the Go launchers look up.
func TestEmbeddedPTX(t *testing.T) {
	want := map[string][]string{
		"qmatvec": {"qmatvec4_r4u1", "qmatvec4_r2u2_b4", "qmatvec4_p2", "qmatvec4_p4_b3"},
		"probe":   {"empty", "add_f32", "read_xor"},
		"qmv":     {"qmv_f32_r4", "qmv_f16_r4_sb", "qmv_i8x2_r4_sb", "qmv_i8x3_r2_sb", "qmv_group_i8x3_r2", "qmv_group_i8x2_r2"},
		"moe":     {"moe_gate_up_f32", "moe_down_f32", "moe_gate_up_i8x2_sb", "moe_down_i8x3_sb"},
		"route":   {"route4", "route8"},
		"gdn":     {"gdn_step_s1", "gdn_step_s4", "gdn_step_s16"},
		"attn":    {"qk_prep_f32", "qk_prep_bf16", "attn_split_f32", "attn_split_bf16", "attn_combine"},
		"ops": {"embed_rows", "add_rmsnorm", "qgemm", "qgemm_s", "qgemm_f64", "qgemm_rows", "conv_silu", "delta_rule", "gated_rmsnorm", "qk_prep_rows_f32",
			"qk_prep_rows_bf16", "attn_rows_f32_j8", "attn_rows_bf16_j16", "route_select", "experts_gate_up", "experts_down",
			"advance", "convert"},
		"sample": {"sample_prep", "sample_row", "logprobs_row"},
	}
	for family, entries := range want {
		ptx, err := PTX(family)
		if err != nil {
			t.Fatal(err)
		}
		if ptx[len(ptx)-1] != 0 || !bytes.Contains(ptx, []byte(".target sm_90\n")) {
			t.Errorf("%s: not NUL-terminated sm_90 PTX", family)
		}
		for _, e := range entries {
			if !bytes.Contains(ptx, []byte(".visible .entry "+e+"(")) {
				t.Errorf("%s: no entry point %s", family, e)
			}
		}
	}
	if _, err := PTX("nonesuch"); err == nil || !strings.Contains(err.Error(), "qmatvec") {
		t.Fatalf("unknown family: %v", err)
	}
}

// TestPTXUpToDate regenerates the PTX with clang-19 and compares (the same
// check as check.sh), the measurement builds of clock/ too; it skips where
// clang-19 is not installed.
func TestPTXUpToDate(t *testing.T) {
	if _, err := exec.LookPath("clang-19"); err != nil {
		t.Skip("clang-19 not installed: cannot regenerate the PTX (apt-get install clang-19)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("sh", "gen.sh", dir).CombinedOutput(); err != nil {
		t.Fatalf("gen.sh: %v\n%s", err, out)
	}
	srcs, _ := filepath.Glob("*.cu")
	clocks, _ := filepath.Glob("clock/*.cu")
	for _, src := range append(srcs, clocks...) {
		name := strings.TrimSuffix(src, ".cu") + ".ptx"
		fresh, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%s has no committed PTX: run go generate ./engine/cuda/kernels", src)
		}
		if !bytes.Equal(fresh, committed) {
			t.Errorf("%s is out of date with %s: run go generate ./engine/cuda/kernels", name, src)
		}
	}
}

// TestEveryEntryWaitsForItsPredecessor: every entry point of every PTX
// module runs griddepcontrol.wait (pdl_begin in device.h) before any load
// or store of global memory, and lets the next kernel launch
// (griddepcontrol.launch_dependents, pdl_trigger) only after it. Under
// pdl=on a kernel may start before the one it depends on has finished; one
// without the wait would read inputs not yet written.
//
// The exceptions load (never store) through L2 before their wait what a
// kernel two or more launches back wrote: since no kernel lets the next
// launch before its own wait, every kernel before the one just before has
// completed by then, and ld.global.cg (and cp.async.cg, a copy into
// shared memory) reads L2, where those writes are, not a stale L1 line.
// earlyLoads says what each reads.
var earlyLoads = map[string]string{
	"moe_down_": "the router's choice (ids and weights); moe_gate_up, the kernel before, lets it launch after its own wait",
	"gdn_step_": "its recurrent state, written by the same layer's step for the token before",
}

// earlyTriggers are measurement kernels (phase.cu, run only by
// TestMeasurePhases) that load their weights, which no kernel writes, and
// let the next kernel launch before their wait: what they measure. The
// chain stays ordered: each waits before it reads the vector the one before
// wrote or writes its own, and the one before waited likewise.
var earlyTriggers = map[string]bool{"phase_step_pre_early": true, "phase_step_reg": true, "phase_step_reg_v4": true, "phase_step_smem": true}

// unwaited are kernels that never wait for the kernel before them: each
// is launched after one that lets it launch only once every block of its
// own has waited for its predecessor (so every kernel before that one has
// finished), and reads what that one writes only behind flags it raises.
// Their global loads must go through L2 (ld.global.cg, ld.relaxed or
// ld.acquire at gpu scope, cp.async.cg), not a possibly stale L1 line.
var unwaited = map[string]string{
	"gdn_chunk_state_flow": "the workspace gdn_chunk_prep_flow writes, a block of tokens once its flag is up; the state, through L2",
}

// l1Load matches a load of global (or generic) memory that may be served
// from L1.
func l1Load(l string) bool {
	m := memoryOp.FindStringSubmatch(l)
	if m == nil || (m[1] != "ld" && m[1] != "ldu") || !reachesGlobal(l) {
		return false
	}
	return !strings.Contains(m[2], ".cg") && !strings.Contains(m[2], ".relaxed.gpu") && !strings.Contains(m[2], ".acquire.gpu")
}

func TestEveryEntryWaitsForItsPredecessor(t *testing.T) {
	for _, family := range Families() {
		ptx, err := PTX(family)
		if err != nil {
			t.Fatal(err)
		}
		entries := strings.Split(string(ptx), ".entry ")[1:]
		if len(entries) == 0 {
			t.Errorf("%s: no entry points", family)
		}
		for _, body := range entries {
			name, _, _ := strings.Cut(body, "(")
			if next := strings.Index(body, ".visible .func"); next >= 0 {
				body = body[:next]
			}
			if _, ok := unwaited[name]; ok {
				if strings.Contains(body, "griddepcontrol") {
					t.Errorf("%s: %s, which must not wait for its predecessor, has griddepcontrol", family, name)
				}
				for _, l := range strings.Split(body, "\n") {
					if l = strings.TrimSpace(l); l1Load(l) {
						t.Errorf("%s: %s loads global memory through L1: %q", family, name, l)
					}
				}
				continue
			}
			if !strings.Contains(body, "griddepcontrol.wait") {
				t.Errorf("%s: %s does not wait for its predecessor (no pdl_begin)", family, name)
				continue
			}
			if earlyTriggers[name] {
				continue
			}
			early := false
			for prefix := range earlyLoads {
				early = early || strings.HasPrefix(name, prefix)
			}
			for _, bad := range unwaitedAccesses(body, early) {
				t.Errorf("%s: %s may run %q before griddepcontrol.wait", family, name, bad)
			}
		}
	}
}

// unwaitedAccesses are the instructions of an entry's PTX body that may
// touch global memory or let the next kernel launch (reachesGlobal) on
// some path from the entry that has not passed griddepcontrol.wait: the
// body is cut into basic blocks at its labels and branches, and a block
// counts as waited only if every path into it has waited, so an access
// laid out after the wait in the text but reached before it is found too.
// With early, ld.global.cg loads and cp.async.cg copies are allowed
// (earlyLoads).
func unwaitedAccesses(body string, early bool) []string {
	type block struct {
		lines []string
		succ  []string // labels branched to
		falls bool     // runs on into the next block
	}
	var blocks []*block
	index := map[string]int{} // label -> block
	cur := &block{falls: true}
	blocks = append(blocks, cur)
	for _, raw := range strings.Split(body, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		if strings.HasPrefix(line, "$") && strings.HasSuffix(line, ":") {
			cur = &block{falls: true}
			blocks = append(blocks, cur)
			index[strings.TrimSuffix(line, ":")] = len(blocks) - 1
			continue
		}
		cur.lines = append(cur.lines, line)
		fields := strings.Fields(strings.TrimSuffix(line, ";"))
		guarded := len(fields) > 0 && strings.HasPrefix(fields[0], "@")
		if guarded {
			fields = fields[1:]
		}
		if len(fields) == 0 {
			continue
		}
		switch op := fields[0]; {
		case op == "bra" || strings.HasPrefix(op, "bra."):
			cur.succ = append(cur.succ, fields[len(fields)-1])
			if !guarded {
				cur.falls = false
			}
		case op == "ret" || op == "exit" || op == "trap":
			if !guarded {
				cur.falls = false
			}
		default:
			continue
		}
		// an instruction after a branch or return starts a new block
		cur = &block{falls: true}
		blocks = append(blocks, cur)
	}
	// waitedIn[i]: every path into block i has passed a wait (the greatest
	// fixed point: all true but the entry's, then lowered until stable)
	waits := make([]bool, len(blocks))
	next := make([][]int, len(blocks))
	for i, b := range blocks {
		for _, l := range b.lines {
			waits[i] = waits[i] || strings.Contains(l, "griddepcontrol.wait")
		}
		for _, l := range b.succ {
			if j, ok := index[l]; ok {
				next[i] = append(next[i], j)
			}
		}
		if b.falls && i+1 < len(blocks) {
			next[i] = append(next[i], i+1)
		}
	}
	waitedIn := make([]bool, len(blocks))
	for i := 1; i < len(blocks); i++ {
		waitedIn[i] = true
	}
	for changed := true; changed; {
		changed = false
		for i := range blocks {
			if waitedIn[i] || waits[i] {
				continue
			}
			for _, j := range next[i] {
				if waitedIn[j] {
					waitedIn[j], changed = false, true
				}
			}
		}
	}
	var bad []string
	for i, b := range blocks {
		waited := waitedIn[i]
		for _, l := range b.lines {
			if strings.Contains(l, "griddepcontrol.wait") {
				waited = true
			}
			if waited {
				continue
			}
			if reachesGlobal(l) && !(early && (strings.Contains(l, "ld.global.cg.") || strings.Contains(l, "cp.async.cg.shared.global"))) {
				bad = append(bad, l)
			}
		}
	}
	return bad
}

// memoryOp matches a PTX instruction that reads or writes memory (its
// opcode and qualifiers, after any guard); the state space among the
// qualifiers says where.
var memoryOp = regexp.MustCompile(`^(?:@!?%\w+\s+)?(ld|ldu|st|atom|red|cp\.async|cp\.reduce\.async|multimem)\b([.:\w]*)`)

// reachesGlobal says whether a PTX line may touch global memory or let the
// next kernel launch: a load, store, atomic or asynchronous copy in the
// global state space or through a generic address (no state space: it may
// be global), a call (whose body is not followed), or
// griddepcontrol.launch_dependents. Shared, local, parameter and constant
// memory, and a cluster's shared memory, are the kernel's own.
func reachesGlobal(l string) bool {
	if strings.Contains(l, "griddepcontrol.launch_dependents") {
		return true
	}
	if f := strings.Fields(l); len(f) > 0 && (f[0] == "call" || strings.HasPrefix(f[0], "call.") ||
		len(f) > 1 && strings.HasPrefix(f[0], "@") && (f[1] == "call" || strings.HasPrefix(f[1], "call."))) {
		return true
	}
	m := memoryOp.FindStringSubmatch(l)
	if m == nil {
		return false
	}
	if m[1] == "cp.async" && (strings.HasPrefix(m[2], ".commit_group") || strings.HasPrefix(m[2], ".wait_")) {
		return false // closes or waits for this thread's copies: no access of its own
	}
	if strings.HasPrefix(m[1], "cp.") || m[1] == "multimem" {
		return true
	}
	for _, space := range []string{".shared", ".local", ".param", ".const"} {
		if strings.Contains(m[2], space) {
			return false
		}
	}
	return true // .global, or a generic address
}

// TestUnwaitedAccessesFollowsBranches: accesses laid out after the wait
// in the text but reached by a branch around it are found (a plain
// reading of the text in order would pass them), and a block reached both
// ways counts as not waited; ld.global.cg passes only where allowed.
func TestUnwaitedAccessesFollowsBranches(t *testing.T) {
	const body = `k(
{
	setp.eq.s32 %p1, %r1, 0;
	@%p1 bra $L__BB0_3;
$L__BB0_1:
	griddepcontrol.wait;
	ld.global.f32 %f1, [%rd1];
$L__BB0_2:
	st.global.f32 [%rd3], %f1;
	ret;
$L__BB0_3:
	@%p2 bra $L__BB0_2;
	ld.global.cg.f32 %f2, [%rd2];
	ld.global.nc.f32 %f3, [%rd4];
	bra.uni $L__BB0_1;
}`
	for _, c := range []struct {
		early bool
		want  []string
	}{
		{false, []string{"st.global.f32 [%rd3], %f1;", "ld.global.cg.f32 %f2, [%rd2];", "ld.global.nc.f32 %f3, [%rd4];"}},
		{true, []string{"st.global.f32 [%rd3], %f1;", "ld.global.nc.f32 %f3, [%rd4];"}},
	} {
		if got := unwaitedAccesses(body, c.early); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("early=%v: got %q, want %q", c.early, got, c.want)
		}
	}
	if got := unwaitedAccesses(strings.Replace(body, "@%p2 bra $L__BB0_2;", "", 1), true); len(got) != 1 {
		t.Errorf("without the branch around the wait: got %q, want only the non-cg load", got)
	}
}

// TestReachesGlobal: loads, stores and atomics through generic addresses
// count as global (they may be), as do calls (whose bodies the wait test
// does not follow) and asynchronous copies; shared memory (a cluster's
// too), local, parameter and constant memory, and prefetches, do not.
func TestReachesGlobal(t *testing.T) {
	for line, want := range map[string]bool{
		"ld.global.nc.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];": true,
		"ld.f32 %f1, [%rd2];":                               true,
		"ld.volatile.f32 %f1, [%rd2];":                      true,
		"@%p1 st.u32 [%rd3], %r1;":                          true,
		"atom.add.u32 %r1, [%rd1], 1;":                      true,
		"atom.global.add.u32 %r1, [%rd1], 1;":               true,
		"red.global.add.f32 [%rd1], %f1;":                   true,
		"cp.async.cg.shared.global [%r1], [%rd1], 16;":      true,
		"cp.async.commit_group;":                            false,
		"cp.async.wait_group 0;":                            false,
		"cp.async.wait_all;":                                false,
		"call.uni (retval0), helper, (param0);":             true,
		"griddepcontrol.launch_dependents;":                 true,
		"ld.shared.f32 %f1, [%r2];":                         false,
		"ld.shared::cluster.f32 %f1, [%r2];":                false,
		"st.shared.v4.u32 [%r1], {%r2, %r3, %r4, %r5};":     false,
		"ld.param.u64 %rd1, [k_param_0];":                   false,
		"ld.local.u32 %r1, [%rd1];":                         false,
		"ld.const.f32 %f1, [c];":                            false,
		"prefetch.global.L2 [%rd1];":                        false,
		"mov.u32 %r1, %tid.x;":                              false,
		"griddepcontrol.wait;":                              false,
	} {
		if got := reachesGlobal(line); got != want {
			t.Errorf("reachesGlobal(%q) = %v, want %v", line, got, want)
		}
	}
}

// TestTargets: every module targets sm_90 but gemm_wg, gemm_fit,
// gemm_fitw, gemm_ws, gemm_downbf, gemm_conv, attn_prefill_wg and attn_prefill_wgo, Hopper's wgmma, whose sm_90a
// PTX is for compute capability 9.0 only.
func TestTargets(t *testing.T) {
	for _, fam := range Families() {
		tgt, err := Target(fam)
		if err != nil {
			t.Fatal(err)
		}
		want := "sm_90"
		if fam == "gemm_wg" || fam == "gemm_fit" || fam == "gemm_fitw" || fam == "gemm_ws" || fam == "gemm_downbf" || fam == "gemm_conv" || fam == "attn_prefill_wg" || fam == "attn_prefill_wgo" {
			want = "sm_90a"
		}
		if tgt != want {
			t.Errorf("%s targets %s, want %s", fam, tgt, want)
		}
	}
	for target, want := range map[string]string{"sm_90a": "9.0", "sm_100a": "10.0", "sm_90": "", "sm_89": "", "compute_90a": ""} {
		if got := ForOnly(target); got != want {
			t.Errorf("ForOnly(%s) = %q, want %q", target, got, want)
		}
	}
}

// TestL1Load: l1Load tells the loads that may hit a stale L1 line (plain,
// .nc, generic) from those through L2 and from non-global ones.
func TestL1Load(t *testing.T) {
	for l, want := range map[string]bool{
		"ld.global.f32 %f1, [%rd1];":                        true,
		"ld.global.nc.v4.u32 {%r1, %r2, %r3, %r4}, [%rd2];": true,
		"ld.f32 %f1, [%rd1];":                               true,
		"@%p1 ld.global.f32 %f1, [%rd1];":                   true,
		"ld.global.cg.f32 %f1, [%rd1];":                     false,
		"ld.relaxed.gpu.global.u32 %r1, [%rd1];":            false,
		"ld.acquire.gpu.global.u32 %r1, [%rd1];":            false,
		"ld.shared.f32 %f1, [%r1];":                         false,
		"st.global.f32 [%rd1], %f1;":                        false,
		"cp.async.cg.shared.global [%r1], [%rd1], 16;":      false,
	} {
		if got := l1Load(l); got != want {
			t.Errorf("l1Load(%q) = %v, want %v", l, got, want)
		}
	}
}
