package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	xcpu "golang.org/x/sys/cpu"

	"petal/engine/backend"
	"petal/engine/cuda"
	"petal/engine/cuda/driver"
)

// noCUDA stands in for a machine without libcuda for the rest of the test.
func noCUDA(t *testing.T) {
	t.Helper()
	devs, open := doctorCUDADevices, newCUDA
	t.Cleanup(func() { doctorCUDADevices, newCUDA = devs, open })
	err := fmt.Errorf("%w: libcuda.so.1: cannot open shared object file", driver.ErrNoDriver)
	doctorCUDADevices = func() ([]driver.Device, error) { return nil, err }
	newCUDA = func(cuda.Options) (backend.Backend, error) { return nil, err }
}

func doctorJSON(t *testing.T, args ...string) (int, map[string]any, string) {
	t.Helper()
	code, out, errs := runMain(t, Streams{}, append([]string{"doctor", "--json"}, args...)...)
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("doctor --json printed no JSON (%v): %q; stderr %q", err, out, errs)
	}
	return code, r, errs
}

func checksOf(t *testing.T, r map[string]any) map[string]map[string]any {
	t.Helper()
	cs := map[string]map[string]any{}
	for _, c := range r["checks"].([]any) {
		m := c.(map[string]any)
		cs[m["name"].(string)] = m
	}
	return cs
}

// TestDoctorCPU: the CPU part names the cores and the SIMD features the
// kernels choose by, and says which kernels run.
func TestDoctorCPU(t *testing.T) {
	r := probeCPU()
	if r.Cores != runtime.NumCPU() || r.GOMAXPROCS < 1 || r.Model == "" || len(r.Kernels) == 0 {
		t.Fatalf("cpu report %+v", r)
	}
	if runtime.GOARCH == "amd64" {
		if slices.Contains(r.Features, "avx2") != xcpu.X86.HasAVX2 || slices.Contains(r.Features, "avx512f") != xcpu.X86.HasAVX512F {
			t.Errorf("features %v disagree with the CPU's", r.Features)
		}
		asm := strings.Contains(strings.Join(r.Kernels, "\n"), "AVX2+FMA assembly")
		if asm != (xcpu.X86.HasAVX2 && xcpu.X86.HasFMA && !buildTag("purego")) {
			t.Errorf("kernels %v: the AVX2 assembly runs exactly where the CPU has AVX2 and FMA", r.Kernels)
		}
	}
}

// TestDoctorNoLibcuda: without libcuda the report says so and why, auto
// picks the CPU, Metal gives its message off macOS, the oracle is skipped
// with how to point it, and the exit code is 0. The JSON's shape is the
// documented one, in snake_case.
func TestDoctorNoLibcuda(t *testing.T) {
	noCUDA(t)
	code, r, errs := doctorJSON(t)
	if code != ExitOK {
		t.Fatalf("exit %d; stderr %q; report %v", code, errs, r)
	}
	for _, k := range []string{"petal", "os", "arch", "cpu", "cuda", "metal", "auto", "checks", "passed", "next"} {
		if _, ok := r[k]; !ok {
			t.Errorf("the report has no %q: %v", k, r)
		}
	}
	cpu := r["cpu"].(map[string]any)
	for _, k := range []string{"model", "cores", "gomaxprocs", "features", "kernels"} {
		if _, ok := cpu[k]; !ok {
			t.Errorf("cpu has no %q: %v", k, cpu)
		}
	}
	cu := r["cuda"].(map[string]any)
	if cu["available"] != false || !strings.Contains(cu["reason"].(string), "libcuda not found") {
		t.Errorf("cuda: %v", cu)
	}
	if a := r["auto"].(map[string]any); a["backend"] != "cpu" || !strings.Contains(a["reason"].(string), "libcuda") {
		t.Errorf("auto: %v", a)
	}
	if m := r["metal"].(map[string]any); runtime.GOOS != "darwin" && m["reason"] != "Metal is only available on macOS with Apple silicon" {
		t.Errorf("metal: %v", m)
	}
	cs := checksOf(t, r)
	if c := cs["cpu runs the embedded model"]; c == nil || c["status"] != "pass" {
		t.Errorf("cpu check: %v", c)
	}
	if c := cs["oracle"]; c == nil || c["status"] != "skip" || !strings.Contains(c["detail"].(string), "--oracle DIR") {
		t.Errorf("oracle check: %v", c)
	}
	if c := cs["cuda against the cpu"]; c == nil || c["status"] != "skip" {
		t.Errorf("cuda check: %v", c)
	}
	if c := cs["conformance suite on cpu"]; c == nil || c["status"] != "pass" || !strings.Contains(c["detail"].(string), "cases pass") {
		t.Errorf("conformance check: %v", c)
	}
	if r["passed"] != true {
		t.Errorf("passed: %v", r["passed"])
	}
}

// TestDoctorText: the plain report ends with what to run for speed, the
// validation layers' variables and the request to send it.
func TestDoctorText(t *testing.T) {
	noCUDA(t)
	code, out, errs := runMain(t, Streams{}, "doctor")
	if code != ExitOK {
		t.Fatalf("exit %d; stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	tail := strings.Join(lines[len(lines)-3:], "\n")
	for _, want := range []string{"petal bench --backend", "MTL_DEBUG_LAYER=1 MTL_SHADER_VALIDATION=1", "send this report"} {
		if !strings.Contains(tail, want) {
			t.Errorf("the last lines %q lack %q", tail, want)
		}
	}
	for _, want := range []string{"CPU\n", "CUDA\n  not available: libcuda not found", "Metal\n", "--backend auto would choose cpu", "PASS  cpu runs the embedded model"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}

// TestDoctorFailingCheck: one failed check makes the exit code 1 and is
// named, in the report and on stderr.
func TestDoctorFailingCheck(t *testing.T) {
	noCUDA(t)
	defer func(f func(*Streams, doctorOptions, backend.Backend) ([]doctorCheck, error)) { doctorChecks = f }(doctorChecks)
	doctorChecks = func(*Streams, doctorOptions, backend.Backend) ([]doctorCheck, error) {
		return []doctorCheck{{Name: "injected", Status: checkFail, Detail: "made to fail"}, {Name: "fine", Status: checkPass}}, nil
	}
	code, r, errs := doctorJSON(t)
	if code != ExitJobsFailed || r["passed"] != false || !strings.Contains(errs, "injected") {
		t.Fatalf("exit %d, passed %v, stderr %q", code, r["passed"], errs)
	}
	code, out, _ := runMain(t, Streams{}, "doctor")
	if code != ExitJobsFailed || !strings.Contains(out, "FAIL  injected: made to fail") || !strings.Contains(out, "SOME CHECKS FAILED") {
		t.Errorf("exit %d, text report:\n%s", code, out)
	}
}

// TestDoctorGPUKernelsFail: a GPU whose kernels do not load is reported with
// the JIT's message, and fails the run.
func TestDoctorGPUKernelsFail(t *testing.T) {
	fakeDoctorGPU(t, "gemm: cuda: gemm: cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (218)\nptxas fatal: Unsupported .version 9.9")
	code, r, _ := doctorJSON(t)
	cu := r["cuda"].(map[string]any)
	if code != ExitJobsFailed || cu["driver_version"] != "CUDA 13.0 (13000)" {
		t.Fatalf("exit %d, cuda %v", code, cu)
	}
	g := cu["gpus"].([]any)[0].(map[string]any)
	if g["compute_capability"] != "9.0" || g["memory_free_bytes"].(float64) != 70<<30 {
		t.Errorf("gpu %v", g)
	}
	if c := checksOf(t, r)["cuda kernels load on GPU 0"]; c == nil || c["status"] != "fail" || !strings.Contains(c["detail"].(string), "ptxas fatal") {
		t.Errorf("kernel check %v", c)
	}
}

// fakeDoctorGPU stands in, for the rest of the test, for a machine with one
// usable Hopper GPU (80 GiB, 70 free) whose ops module loads and whose
// other modules fail with moduleErrors.
func fakeDoctorGPU(t *testing.T, moduleErrors ...string) {
	t.Helper()
	noCUDA(t)
	probe := doctorGPU
	t.Cleanup(func() { doctorGPU = probe })
	doctorCUDADevices = func() ([]driver.Device, error) {
		return []driver.Device{{Ordinal: 0, Name: "NVIDIA Test", Major: 9, Minor: 0, Memory: 80 << 30, DriverAPI: 13000}}, nil
	}
	doctorGPU = func(d driver.Device) gpuReport {
		g := probeGPUReportOf(d)
		g.Usable, g.MemoryFree, g.ModulesLoaded, g.ModuleErrors = true, 70<<30, []string{"ops", "gemm"}, moduleErrors
		g.ModulesPrebuilt = []string{"ops"}
		return g
	}
}

func probeGPUReportOf(d driver.Device) gpuReport {
	return gpuReport{Ordinal: d.Ordinal, Name: d.Name, ComputeCapability: fmt.Sprintf("%d.%d", d.Major, d.Minor), MemoryTotal: d.Memory}
}

// TestDoctorOracle: with an oracle folder the CPU is held to the float32
// bars; a --oracle that is not one is a usage error.
func TestDoctorOracle(t *testing.T) {
	noCUDA(t)
	dir := "../../shared/oracle"
	if _, err := os.Stat(dir + "/tiny-qwen36-moe-4bit"); err != nil {
		t.Skipf("no oracle at %s", dir)
	}
	code, r, errs := doctorJSON(t, "--oracle", dir)
	c := checksOf(t, r)["oracle on cpu (float32 bars)"]
	if code != ExitOK || c == nil || c["status"] != "pass" || !strings.Contains(c["output"].(string), "meets the float32 bars") {
		t.Fatalf("exit %d, stderr %q, check %v", code, errs, c)
	}
	code, _, errs = runMain(t, Streams{}, "doctor", "--oracle", t.TempDir())
	if code != ExitUsage || !strings.Contains(errs, "no reference model") {
		t.Errorf("a folder without the oracle: exit %d, stderr %q", code, errs)
	}
}

// TestJudgeAgainstCPU: a backend fails when its logits are off by more than
// the bar or its greedy tokens differ.
func TestJudgeAgainstCPU(t *testing.T) {
	ref := &embedded{logits: []float32{1, 2, 3, 4}, tokens: []int32{5, 6}}
	for _, tc := range []struct {
		name string
		got  *embedded
		want string
	}{
		{"the same", &embedded{logits: []float32{1, 2, 3, 4}, tokens: []int32{5, 6}}, checkPass},
		{"logits off", &embedded{logits: []float32{1, 2, 3, 5}, tokens: []int32{5, 6}}, checkFail},
		{"tokens differ", &embedded{logits: []float32{1, 2, 3, 4}, tokens: []int32{5, 7}}, checkFail},
	} {
		if c := judgeAgainstCPU(doctorCheck{}, tc.got, ref, 1e-4); c.Status != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, c.Status, c.Detail, tc.want)
		}
	}
}

// TestDoctorModuleNotFor: gemm_wg's sm_90a PTX is loaded on a GPU of
// compute capability 9.0 only, so that doctor on any other GPU does not
// fail on a module the backend never loads there; the sm_90 modules are
// loaded everywhere (where they fail, that is a failure).
func TestDoctorModuleNotFor(t *testing.T) {
	if why := moduleNotFor("gemm_wg", "10.0"); !strings.Contains(why, "sm_90a") || !strings.Contains(why, "9.0 only") {
		t.Errorf("gemm_wg on 10.0: %q", why)
	}
	for _, c := range [][2]string{{"gemm_wg", "9.0"}, {"gemm", "10.0"}, {"gemm", "8.9"}, {"ops", "9.0"}} {
		if why := moduleNotFor(c[0], c[1]); why != "" {
			t.Errorf("%s on %s: skipped (%s)", c[0], c[1], why)
		}
	}
}

// TestDoctorKernelCache: with a GPU, the report says where the driver keeps
// petal's compiled kernels and how much is there, that an empty cache
// means a slow first load, and that CUDA_CACHE_DISABLE=1 makes every run
// compile them.
func TestDoctorKernelCache(t *testing.T) {
	fakeDoctorGPU(t)
	dir := t.TempDir()
	t.Setenv("CUDA_CACHE_PATH", dir)
	t.Setenv("CUDA_CACHE_DISABLE", "")
	text := func() string {
		_, out, _ := runMain(t, Streams{}, "doctor")
		return out
	}
	if out := text(); !strings.Contains(out, "the driver's cache ("+dir+") was empty") {
		t.Errorf("an empty cache: the report lacks it:\n%s", out)
	}
	if out := text(); !strings.Contains(out, "1 of them from machine code built for this GPU (no compile)") {
		t.Errorf("one module of two prebuilt: the report lacks it:\n%s", out)
	}
	if err := os.WriteFile(filepath.Join(dir, "index"), make([]byte, 2_500_000), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := text(); !strings.Contains(out, "holds 2.5 MB of compiled kernels") {
		t.Errorf("a cache of 2.5 MB: the report lacks it:\n%s", out)
	}
	_, r, _ := doctorJSON(t)
	if kc, _ := r["cuda"].(map[string]any)["kernel_cache"].(map[string]any); kc["dir"] != dir || kc["bytes"] != 2.5e6 || kc["off"] != false {
		t.Errorf("--json kernel_cache %v", kc)
	}
	if gpus, _ := r["cuda"].(map[string]any)["gpus"].([]any); len(gpus) != 1 || fmt.Sprint(gpus[0].(map[string]any)["modules_prebuilt"]) != "[ops]" {
		t.Errorf("--json gpus %v: want modules_prebuilt [ops]", gpus)
	}
	t.Setenv("CUDA_CACHE_DISABLE", "1")
	if out := text(); !strings.Contains(out, "every run compiles petal's kernels") {
		t.Errorf("the cache off: the report lacks it:\n%s", out)
	}
}
