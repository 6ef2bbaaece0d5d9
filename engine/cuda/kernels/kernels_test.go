package kernels

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmbeddedPTX: every family's PTX is embedded, targets sm_90, ends in
// NUL, and defines the entry points the Go launchers look up.
func TestEmbeddedPTX(t *testing.T) {
	want := map[string][]string{
		"qmatvec":  {"qmatvec4_r4u1", "qmatvec4_r2u2_b4", "qmatvec4_p2", "qmatvec4_p4_b3"},
		"probe":    {"empty", "add_f32", "read_xor"},
		"qmv":      {"qmv_f32_r4", "qmv_f16_r4_sb", "qmv_i8x2_r4_sb", "qmv_i8x3_r2_sb", "qmv_group_i8x3_r2", "qmv_group_i8x2_r2"},
		"moe":      {"moe_gate_up_f32", "moe_down_f32", "moe_gate_up_i8x2_sb", "moe_down_i8x3_sb"},
		"route":    {"route4", "route8"},
		"route_cl": {"route_norm4_cl", "route_norm8_cl"},
		"gdn":      {"gdn_step_s1", "gdn_step_s4", "gdn_step_s16"},
		"attn":     {"qk_prep_f32", "qk_prep_bf16", "attn_split_f32", "attn_split_bf16", "attn_combine"},
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
// completed by then, and ld.global.cg reads L2, where those writes are,
// not a stale L1 line. earlyLoads says what each reads.
var earlyLoads = map[string]string{
	"moe_down_": "the router's choice (ids and weights); moe_gate_up, the kernel before, lets it launch after its own wait",
	"gdn_step_": "its recurrent state, written by the same layer's step for the token before",
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
			wait := strings.Index(body, "griddepcontrol.wait")
			if wait < 0 {
				t.Errorf("%s: %s does not wait for its predecessor (no pdl_begin)", family, name)
				continue
			}
			before := body[:wait]
			for prefix := range earlyLoads {
				if strings.HasPrefix(name, prefix) {
					before = strings.ReplaceAll(before, "ld.global.cg.", "")
				}
			}
			for _, access := range []string{"ld.global", "st.global", "atom.global", "red.global", "cp.async", "griddepcontrol.launch_dependents"} {
				if strings.Contains(before, access) {
					t.Errorf("%s: %s has %s before griddepcontrol.wait", family, name, access)
				}
			}
		}
	}
}

// TestTargets: every module targets sm_90 but gemm_wg, gemm_fit and
// attn_prefill_wg, Hopper's wgmma, whose sm_90a PTX is for compute
// capability 9.0 only.
func TestTargets(t *testing.T) {
	for _, fam := range Families() {
		tgt, err := Target(fam)
		if err != nil {
			t.Fatal(err)
		}
		want := "sm_90"
		if fam == "gemm_wg" || fam == "gemm_fit" || fam == "attn_prefill_wg" {
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
