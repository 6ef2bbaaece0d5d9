package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
	xcpu "golang.org/x/sys/cpu"

	"petal/engine"
	"petal/engine/backend"
	"petal/engine/backend/backendtest"
	"petal/engine/cpu"
	"petal/engine/cuda"
	"petal/engine/cuda/driver"
	"petal/engine/cuda/kernels"
	"petal/engine/metal"
	"petal/engine/model"
	"petal/engine/oracle"
	"petal/engine/sample"
)

func doctorCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:      "doctor",
		Usage:     "report the machine (CPU, CUDA, Metal), the backend auto picks, and check each usable backend against the CPU",
		ArgsUsage: " ",
		Description: `Prints what petal finds on this machine and checks that it computes right:
  CPU    the model, the cores, the SIMD features and which of petal's CPU kernels use them;
  CUDA   whether libcuda loads (and why not), the driver version, each GPU's name, compute
         capability and free/total memory, and whether every embedded PTX module of petal's
         kernels loads (with the driver's JIT message when one does not; gemm_wg, Hopper's
         wgmma, is built for compute capability 9.0 only and tried on such a GPU alone), and
         the driver's cache of compiled kernels (empty or off: loading them takes half a minute);
  Metal  on macOS the device, its GPU family, the MSL version and math mode read back from
         the compiler, every embedded Metal library compiled with each of its kernels
         (gemm_tensor, on Metal 4's tensor operations, only where the device has them), and
         whether each object petal messages responds to every selector it is sent;
         elsewhere that Metal is only available on macOS with Apple silicon;
then which backend --backend auto would choose and why. Checks that compute: the embedded
model on each usable backend against the CPU (the logits of a fixed 32-token prompt within a
relative L2 bar, and the same 16 greedy tokens after it), and the oracle model against --oracle
(default ../shared/oracle) when that folder is there, each backend held to the bars it is
built for (cuda's tensor-core prefill to the bfloat16 bars), and the conformance suite (every op
against its float64 reference, outputs poisoned) on the CPU and on the GPU backend: cuda, or
metal on a Mac (which auto does not pick until it has run on Apple hardware: this report is how
it gets to run).

The exit code is 0 when every check that could run passed, 1 when one failed. --json prints
the same report as JSON. This report is what to send with a bug report or from a first run on
new hardware.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "oracle", Value: "../shared/oracle", Usage: "oracle folder (reference model and data); skipped when the default is absent"},
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErr("doctor takes no arguments (got %q)", c.Args().First())
			}
			return runDoctor(st, doctorOptions{Oracle: c.String("oracle"), OracleSet: c.IsSet("oracle"), JSON: c.Bool("json")})
		},
	}
}

type doctorOptions struct {
	Oracle    string
	OracleSet bool
	JSON      bool
}

// doctorReport is what petal doctor prints (as text, or as JSON).
type doctorReport struct {
	Petal  string        `json:"petal"`
	OS     string        `json:"os"`
	Arch   string        `json:"arch"`
	CPU    cpuReport     `json:"cpu"`
	CUDA   cudaReport    `json:"cuda"`
	Metal  metalReport   `json:"metal"`
	Auto   autoReport    `json:"auto"`
	Checks []doctorCheck `json:"checks"`
	Passed bool          `json:"passed"`
	Next   []string      `json:"next"`
}

type cpuReport struct {
	Model      string   `json:"model"`
	Cores      int      `json:"cores"`
	GOMAXPROCS int      `json:"gomaxprocs"`
	Features   []string `json:"features"`
	// Kernels says which SIMD kernels petal's CPU code runs here (engine/cpu
	// and engine/quant pick them from the same features).
	Kernels []string `json:"kernels"`
}

type cudaReport struct {
	Available     bool        `json:"available"`
	Reason        string      `json:"reason,omitempty"` // why not, when not
	DriverVersion string      `json:"driver_version,omitempty"`
	GPUs          []gpuReport `json:"gpus,omitempty"`
	// KernelCache is the driver's cache of compiled kernels: empty, the
	// next run compiles petal's kernels for the GPU (half a minute).
	KernelCache *kernelCacheReport `json:"kernel_cache,omitempty"`
}

type kernelCacheReport struct {
	Dir   string `json:"dir"`
	Bytes int64  `json:"bytes"` // -1: not readable
	Off   bool   `json:"off"`   // CUDA_CACHE_DISABLE=1
}

type gpuReport struct {
	Ordinal           int      `json:"ordinal"`
	Name              string   `json:"name"`
	ComputeCapability string   `json:"compute_capability"`
	MemoryTotal       int64    `json:"memory_total_bytes"`
	MemoryFree        int64    `json:"memory_free_bytes"`
	Usable            bool     `json:"usable"`
	Reason            string   `json:"reason,omitempty"`
	ModulesLoaded     []string `json:"modules_loaded"`
	// ModulesPrebuilt are those loaded from the binary's machine code for
	// this GPU (kernels/sass), not compiled by the driver.
	ModulesPrebuilt []string `json:"modules_prebuilt,omitempty"`
	ModuleErrors    []string `json:"module_errors,omitempty"`
	ModulesSkipped  []string `json:"modules_skipped,omitempty"` // built for another GPU only (sm_90a on a GPU not 9.0)
}

type metalReport struct {
	Available      bool           `json:"available"`
	Reason         string         `json:"reason,omitempty"`
	Device         string         `json:"device,omitempty"`
	GPUFamily      string         `json:"gpu_family,omitempty"`
	UnifiedMemory  bool           `json:"unified_memory,omitempty"`
	MaxBufferBytes uint64         `json:"max_buffer_bytes,omitempty"`
	WorkingSet     uint64         `json:"working_set_bytes,omitempty"`
	MSLVersion     string         `json:"msl_version,omitempty"`
	MathMode       string         `json:"math_mode,omitempty"`
	Libraries      []metalLibrary `json:"libraries,omitempty"`
	Selectors      string         `json:"selectors,omitempty"`
	// SelectorsChecked: every message's receiver was asked (respondsToSelector:);
	// SelectorsMissing the required ones that do not respond.
	SelectorsChecked bool     `json:"selectors_checked,omitempty"`
	SelectorsMissing []string `json:"selectors_missing,omitempty"`
}

type metalLibrary struct {
	Family   string   `json:"family"`
	Compiled bool     `json:"compiled"`
	Kernels  []string `json:"kernels"`
	Error    string   `json:"error,omitempty"`
	Warnings string   `json:"warnings,omitempty"`
	// MSL is the language version it was compiled as, where not the
	// report's (gemm_tensor: 4.0); Skipped why it was not compiled (a
	// device without Metal 4's tensor operations).
	MSL     string `json:"msl_version,omitempty"`
	Skipped string `json:"skipped,omitempty"`
}

type autoReport struct {
	Backend string `json:"backend"`
	Reason  string `json:"reason"`
}

// Check statuses.
const (
	checkPass = "pass"
	checkFail = "fail"
	checkSkip = "skip"
)

type doctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Output string `json:"output,omitempty"` // what the check printed (the oracle's tables)
}

// The probes doctor runs, variables so that tests can stand in for a
// machine with or without a GPU, and for a check that fails.
var (
	doctorCPU         = probeCPU
	doctorCUDADevices = driver.Devices
	doctorGPU         = probeGPU
	doctorMetal       = probeMetal // doctor_darwin.go, doctor_other.go
	doctorChecks      = runDoctorChecks
)

func runDoctor(st *Streams, o doctorOptions) error {
	r := &doctorReport{OS: runtime.GOOS, Arch: runtime.GOARCH, Petal: strings.TrimSpace(strings.SplitN(versionText(), "\n", 2)[0])}
	r.CPU = doctorCPU()
	r.CUDA = probeCUDA()
	r.Metal = doctorMetal()
	r.Checks = append(r.Checks, metalChecks(r.Metal)...)
	for _, g := range r.CUDA.GPUs {
		if g.Usable {
			c := doctorCheck{Name: fmt.Sprintf("cuda kernels load on GPU %d", g.Ordinal), Status: checkPass,
				Detail: fmt.Sprintf("%d PTX modules loaded: %s", len(g.ModulesLoaded), strings.Join(g.ModulesLoaded, " "))}
			if len(g.ModulesSkipped) > 0 {
				c.Detail += "; not loaded: " + strings.Join(g.ModulesSkipped, "; ")
			}
			if len(g.ModuleErrors) > 0 {
				c.Status, c.Detail = checkFail, strings.Join(g.ModuleErrors, "\n")
			}
			r.Checks = append(r.Checks, c)
		}
	}
	var gpu backend.Backend
	r.Auto, gpu = chooseAuto()
	checks, err := doctorChecks(st, o, gpu)
	if err == nil {
		checks = append(checks, doctorConformance(cpu.New()))
		if gpu != nil {
			checks = append(checks, doctorConformance(gpu))
		}
	}
	if c, ok := gpu.(io.Closer); ok {
		c.Close()
	}
	if err != nil {
		return err
	}
	r.Checks = append(r.Checks, checks...)
	r.Passed = true
	var failed []string
	for _, c := range r.Checks {
		if c.Status == checkFail {
			r.Passed = false
			failed = append(failed, c.Name)
		}
	}
	speed := "petal bench --backend " + r.Auto.Backend
	if runtime.GOOS == "darwin" {
		speed = "petal bench --backend metal"
	}
	r.Next = []string{
		"for speed: " + speed,
		"on a Mac, Metal's validation layers: MTL_DEBUG_LAYER=1 MTL_SHADER_VALIDATION=1 petal doctor",
		"send this report (petal doctor > doctor.txt, or petal doctor --json > doctor.json) with the issue or question",
	}
	if o.JSON {
		if err := writeBenchJSON(st.Out, r); err != nil {
			return err
		}
	} else if err := writeDoctorText(st.Out, r); err != nil {
		return err
	}
	if !r.Passed {
		return &exitError{ExitJobsFailed, fmt.Errorf("doctor: %d check(s) failed: %s", len(failed), strings.Join(failed, "; "))}
	}
	return nil
}

// probeCPU reads the CPU's model, cores and the features petal's kernels
// choose by (engine/cpu: AVX2 with FMA; engine/quant: AVX2 with FMA, and
// AVX-512 F+VL for the 4-bit row kernel; no assembly on other
// architectures, nor in a build with the purego tag).
func probeCPU() cpuReport {
	r := cpuReport{Model: cpuModel(), Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	pure := buildTag("purego")
	switch runtime.GOARCH {
	case "amd64":
		for _, f := range []struct {
			name string
			has  bool
		}{{"avx2", xcpu.X86.HasAVX2}, {"fma", xcpu.X86.HasFMA}, {"avx512f", xcpu.X86.HasAVX512F}, {"avx512vl", xcpu.X86.HasAVX512VL}} {
			if f.has {
				r.Features = append(r.Features, f.name)
			}
		}
		avx2 := xcpu.X86.HasAVX2 && xcpu.X86.HasFMA
		switch {
		case pure:
			r.Kernels = []string{"portable Go kernels (built with the purego tag: no assembly)"}
		case !avx2:
			r.Kernels = []string{"portable Go kernels (no AVX2 with FMA on this CPU)"}
		default:
			r.Kernels = []string{"engine/cpu: AVX2+FMA assembly (dot, axpy, exp, delta rule)", "engine/quant: AVX2+FMA mat-vec and mat-mul"}
			if xcpu.X86.HasAVX512F && xcpu.X86.HasAVX512VL {
				r.Kernels = append(r.Kernels, "engine/quant: AVX-512 row kernel (4-bit, groups of 64)")
			}
		}
	case "arm64":
		for _, f := range []struct {
			name string
			has  bool
		}{{"asimd", xcpu.ARM64.HasASIMD}, {"fphp", xcpu.ARM64.HasFPHP}, {"asimdhp", xcpu.ARM64.HasASIMDHP}, {"asimddp", xcpu.ARM64.HasASIMDDP}, {"sve", xcpu.ARM64.HasSVE}} {
			if f.has {
				r.Features = append(r.Features, f.name)
			}
		}
		r.Kernels = []string{"portable Go kernels (petal's CPU assembly is for amd64 only)"}
	default:
		r.Kernels = []string{"portable Go kernels"}
	}
	return r
}

// buildTag reports whether the binary was built with tag.
func buildTag(tag string) bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-tags" {
			for _, t := range strings.Split(s.Value, ",") {
				if t == tag {
					return true
				}
			}
		}
	}
	return false
}

// cpuModel is the CPU's name: /proc/cpuinfo on Linux, sysctl on macOS.
func cpuModel() string {
	switch runtime.GOOS {
	case "linux":
		b, err := os.ReadFile("/proc/cpuinfo")
		if err != nil {
			return "unknown (" + err.Error() + ")"
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && (strings.TrimSpace(k) == "model name" || strings.TrimSpace(k) == "Model") {
				return strings.TrimSpace(v)
			}
		}
	case "darwin":
		if b, err := exec.Command("sysctl", "-n", "machdep.cpu.brand_string").Output(); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return "unknown"
}

// probeCUDA lists the GPUs the driver sees and tries each one.
func probeCUDA() cudaReport {
	devs, err := doctorCUDADevices()
	if err != nil {
		r := cudaReport{Reason: err.Error()}
		switch {
		case errors.Is(err, driver.ErrUnsupportedOS):
			r.Reason = "CUDA is only available on Linux"
		case errors.Is(err, driver.ErrNoDriver):
			r.Reason = "libcuda not found: " + err.Error()
		}
		return r
	}
	kc := cuda.DriverKernelCache()
	r := cudaReport{Available: true, KernelCache: &kernelCacheReport{Dir: kc.Dir, Bytes: kc.Bytes, Off: kc.Off}}
	if len(devs) > 0 {
		v := devs[0].DriverAPI
		r.DriverVersion = fmt.Sprintf("CUDA %d.%d (%d)", v/1000, v%1000/10, v)
	}
	for _, d := range devs {
		r.GPUs = append(r.GPUs, doctorGPU(d))
	}
	return r
}

// probeGPU opens GPU d, reads its free memory and loads every embedded
// PTX module there, as the backend does.
func probeGPU(d driver.Device) gpuReport {
	g := gpuReport{Ordinal: d.Ordinal, Name: d.Name, ComputeCapability: fmt.Sprintf("%d.%d", d.Major, d.Minor), MemoryTotal: d.Memory, MemoryFree: -1}
	ctx, err := driver.Open(d.Ordinal)
	if err != nil {
		g.Reason = err.Error()
		return g
	}
	defer ctx.Close()
	if free, _, err := ctx.MemInfo(); err == nil {
		g.MemoryFree = free
	}
	g.Usable = true
	for _, fam := range kernels.Families() {
		if why := moduleNotFor(fam, g.ComputeCapability); why != "" {
			g.ModulesSkipped = append(g.ModulesSkipped, why)
			continue
		}
		m, prebuilt, err := cuda.LoadFamily(ctx, fam)
		if err == nil {
			m.Close()
			g.ModulesLoaded = append(g.ModulesLoaded, fam)
			if prebuilt {
				g.ModulesPrebuilt = append(g.ModulesPrebuilt, fam)
			}
			continue
		}
		g.ModuleErrors = append(g.ModuleErrors, fmt.Sprintf("%s: %v", fam, err))
	}
	return g
}

// moduleNotFor says why family's PTX is not loaded on a GPU of compute
// capability cc: built for another one only (gemm_wg's sm_90a, Hopper's
// wgmma, which the backend loads on 9.0 alone), or "" when it is loaded.
func moduleNotFor(family, cc string) string {
	t, err := kernels.Target(family)
	if err != nil {
		return ""
	}
	if only := kernels.ForOnly(t); only != "" && only != cc {
		return fmt.Sprintf("%s (%s PTX, for compute capability %s only; not used on this GPU)", family, t, only)
	}
	return ""
}

// metalChecks turns the Metal probe's findings into checks: every library
// compiling, and whether every selector of the message table responds.
func metalChecks(m metalReport) []doctorCheck {
	if !m.Available {
		return nil
	}
	var cs []doctorCheck
	for _, l := range m.Libraries {
		msl := m.MSLVersion
		if l.MSL != "" {
			msl = l.MSL
		}
		c := doctorCheck{Name: "metal library " + l.Family + " compiles", Status: checkPass,
			Detail: fmt.Sprintf("MSL %s, %s math, kernels: %s", msl, m.MathMode, strings.Join(l.Kernels, " "))}
		switch {
		case l.Skipped != "":
			c.Status, c.Detail = checkSkip, l.Skipped
		case !l.Compiled:
			c.Status, c.Detail = checkFail, l.Error
		}
		cs = append(cs, c)
	}
	sc := doctorCheck{Name: "metal selectors respond", Status: checkSkip, Detail: m.Selectors}
	if m.SelectorsChecked {
		sc.Status = checkPass
		if len(m.SelectorsMissing) > 0 {
			sc.Status = checkFail
		}
	}
	cs = append(cs, sc)
	return cs
}

// chooseAuto is what --backend auto would pick (autoBackend's rule), with
// the opened GPU backend for the checks to reuse: cuda, or on a Mac metal,
// which auto does not pick yet but doctor checks.
func chooseAuto() (autoReport, backend.Backend) {
	b, err := newCUDA(cuda.DefaultOptions())
	if err == nil {
		name := "GPU 0"
		if d, ok := b.(interface{ Device() driver.Device }); ok {
			name = d.Device().String()
		}
		return autoReport{Backend: "cuda", Reason: "a usable NVIDIA GPU: " + name}, b
	}
	why := "no usable NVIDIA GPU (" + err.Error() + ")"
	if onMac || autoMetal {
		m, err := newMetal(metal.DefaultOptions())
		if err == nil {
			name := "the default device"
			if d, ok := m.(interface{ Device() string }); ok {
				name = d.Device()
			}
			if autoMetal {
				return autoReport{Backend: "metal", Reason: why + "; a Metal device: " + name}, m
			}
			// checked below all the same: this report is how it gets to run
			return autoReport{Backend: "cpu", Reason: why + "; a Metal device (" + name +
				"), which auto does not pick until the Metal backend has run on Apple hardware (--backend metal does)"}, m
		}
		why += "; no usable Metal device (" + err.Error() + ")"
	}
	return autoReport{Backend: "cpu", Reason: why}, nil
}

// runDoctorChecks runs the checks that compute: the embedded model on each
// usable backend against the CPU, then the oracle.
func runDoctorChecks(st *Streams, o doctorOptions, gpu backend.Backend) ([]doctorCheck, error) {
	dir, _, err := resolveModel("", st.Getenv)
	if err != nil {
		return nil, err
	}
	var cs []doctorCheck
	ref, err := embeddedRun(dir, nil)
	if err != nil {
		cs = append(cs, doctorCheck{Name: "cpu runs the embedded model", Status: checkFail, Detail: err.Error()})
	} else {
		cs = append(cs, doctorCheck{Name: "cpu runs the embedded model", Status: checkPass,
			Detail: fmt.Sprintf("%d prompt tokens, logits finite, greedy continuation %v", len(doctorPrompt), ref.tokens)})
	}
	// the GPU backend: cuda, or metal on a Mac (checked though auto does not pick it yet)
	gpuName := "cuda"
	if gpu != nil {
		gpuName = gpu.Name()
	}
	gpuBars := barsFor(gpuName)
	if gpu != nil && err == nil {
		cs = append(cs, compareWithCPU(gpuName, gpu, dir, ref, gpuBars))
	} else if gpu == nil {
		cs = append(cs, doctorCheck{Name: "cuda against the cpu", Status: checkSkip, Detail: "no usable NVIDIA GPU"})
		if runtime.GOOS == "darwin" {
			cs = append(cs, doctorCheck{Name: "metal against the cpu", Status: checkSkip, Detail: "no usable Metal device (see what auto chose, and why)"})
		}
	}

	// the oracle
	if _, err := os.Stat(filepath.Join(o.Oracle, "tiny-qwen36-moe-4bit")); err != nil {
		if o.OracleSet {
			return nil, usageErr("--oracle %s: no reference model there (want %s)", o.Oracle, filepath.Join(o.Oracle, "tiny-qwen36-moe-4bit"))
		}
		return append(cs, doctorCheck{Name: "oracle", Status: checkSkip,
			Detail: fmt.Sprintf("no oracle folder at %s; point one with --oracle DIR", o.Oracle)}), nil
	}
	type run struct{ backend, bars string }
	runs := []run{{"cpu", "float32"}}
	if gpu != nil {
		runs = append(runs, run{gpuName, gpuBars})
	}
	for _, rn := range runs {
		b, _ := oracleBars(rn.bars)
		var out, errs bytes.Buffer
		sub := &Streams{Out: &out, Err: &errs, Getenv: st.Getenv}
		c := doctorCheck{Name: fmt.Sprintf("oracle on %s (%s bars)", rn.backend, rn.bars), Status: checkPass}
		if err := runOracle(sub, o.Oracle, rn.backend, 64, b); err != nil {
			c.Status, c.Detail = checkFail, err.Error()
		} else {
			c.Detail = fmt.Sprintf("the %s backend meets the %s bars of %s", rn.backend, rn.bars, o.Oracle)
		}
		c.Output = strings.TrimRight(out.String()+errs.String(), "\n")
		cs = append(cs, c)
	}
	return cs, nil
}

// doctorPrompt is the fixed prompt the backends are compared on: 32 token
// ids spread over the embedded model's vocabulary.
var doctorPrompt = func() []int32 {
	ids := make([]int32, 32)
	for i := range ids {
		ids[i] = int32(100 + (i*7919)%3000)
	}
	return ids
}()

const doctorGreedy = 16

type embedded struct {
	logits []float32 // every prompt position's
	tokens []int32   // the greedy continuation
}

// embeddedRun runs doctorPrompt through the embedded model on be (the CPU
// when nil): every position's logits, then doctorGreedy greedy tokens.
func embeddedRun(dir string, be backend.Backend) (*embedded, error) {
	if be == nil {
		var err error
		if be, err = newBackend("cpu", nil); err != nil {
			return nil, err
		}
	}
	e, err := engine.Open(dir, engine.Options{Backend: be, Chunk: 16, MaxContext: 64})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	m := e.Model
	s := m.NewState(len(doctorPrompt) + doctorGreedy + 1)
	r := &embedded{}
	if err := m.Forward(s, doctorPrompt, model.AllLogits, func(_ int, l []float32) { r.logits = append(r.logits, l...) }); err != nil {
		return nil, err
	}
	for _, v := range r.logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("%s: the logits hold %v", be.Name(), v)
		}
	}
	V := m.Dims.Vocab
	next := sample.Argmax(r.logits[len(r.logits)-V:])
	for range doctorGreedy {
		r.tokens = append(r.tokens, next)
		if err := m.Forward(s, []int32{next}, model.LastLogits, func(_ int, l []float32) { next = sample.Argmax(l) }); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// compareWithCPU runs the embedded model on be and holds it to the CPU's
// run ref: the logits within the bars' relative L2, the same greedy tokens.
func compareWithCPU(name string, be backend.Backend, dir string, ref *embedded, barsName string) doctorCheck {
	c := doctorCheck{Name: fmt.Sprintf("%s against the cpu (%s bars)", name, barsName)}
	b, _ := oracleBars(barsName)
	got, err := embeddedRun(dir, be)
	if err != nil {
		c.Status, c.Detail = checkFail, err.Error()
		return c
	}
	return judgeAgainstCPU(c, got, ref, b.relL2)
}

func judgeAgainstCPU(c doctorCheck, got, ref *embedded, bar float64) doctorCheck {
	d := oracle.Compare(got.logits, ref.logits)
	same := fmt.Sprint(got.tokens) == fmt.Sprint(ref.tokens)
	c.Detail = fmt.Sprintf("logits of the %d-token prompt: rel-L2 %.3g (bar %.3g), max |Δ| %.3g; %d greedy tokens %s",
		len(doctorPrompt), d.RelL2, bar, d.MaxAbs, doctorGreedy, map[bool]string{true: "equal", false: fmt.Sprintf("differ: %v, cpu %v", got.tokens, ref.tokens)}[same])
	c.Status = checkPass
	if d.RelL2 > bar || !same || math.IsNaN(d.RelL2) {
		c.Status = checkFail
	}
	return c
}

func writeDoctorText(w io.Writer, r *doctorReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %s/%s\n\n", r.Petal, r.OS, r.Arch)
	fmt.Fprintf(&b, "CPU\n  model:     %s\n  cores:     %d (GOMAXPROCS %d)\n  features:  %s\n", r.CPU.Model, r.CPU.Cores, r.CPU.GOMAXPROCS, orNone(r.CPU.Features))
	for i, k := range r.CPU.Kernels {
		label := "  kernels:   "
		if i > 0 {
			label = "             "
		}
		fmt.Fprintf(&b, "%s%s\n", label, k)
	}
	b.WriteString("\nCUDA\n")
	if !r.CUDA.Available {
		fmt.Fprintf(&b, "  not available: %s\n", r.CUDA.Reason)
	} else {
		fmt.Fprintf(&b, "  driver:    %s\n", r.CUDA.DriverVersion)
		if kc := r.CUDA.KernelCache; kc != nil {
			switch {
			case kc.Off:
				fmt.Fprintf(&b, "  kernels:   the driver's cache is off (CUDA_CACHE_DISABLE=1): every run compiles petal's kernels (about half a minute)\n")
			case kc.Bytes == 0:
				fmt.Fprintf(&b, "  kernels:   the driver's cache (%s) was empty: loading petal's kernels below compiled those not prebuilt for the GPU (up to half a minute); later runs reuse them\n", kc.Dir)
			case kc.Bytes > 0:
				fmt.Fprintf(&b, "  kernels:   the driver's cache (%s) holds %.1f MB of compiled kernels\n", kc.Dir, float64(kc.Bytes)/1e6)
			}
		}
		for _, g := range r.CUDA.GPUs {
			free := "free unknown"
			if g.MemoryFree >= 0 {
				free = fmt.Sprintf("%.1f GiB free", float64(g.MemoryFree)/(1<<30))
			}
			fmt.Fprintf(&b, "  GPU %d:     %s, compute capability %s, %s of %.1f GiB\n", g.Ordinal, g.Name, g.ComputeCapability, free, float64(g.MemoryTotal)/(1<<30))
			switch {
			case !g.Usable:
				fmt.Fprintf(&b, "             not usable: %s\n", g.Reason)
			case len(g.ModuleErrors) == 0:
				fmt.Fprintf(&b, "             petal's kernels load: %s\n", strings.Join(g.ModulesLoaded, " "))
				if n := len(g.ModulesPrebuilt); n > 0 {
					fmt.Fprintf(&b, "             %d of them from machine code built for this GPU (no compile)\n", n)
				}
				for _, m := range g.ModulesSkipped {
					fmt.Fprintf(&b, "             not loaded: %s\n", m)
				}
			default:
				fmt.Fprintf(&b, "             kernels that do not load:\n")
				for _, e := range g.ModuleErrors {
					fmt.Fprintf(&b, "%s\n", indent(e, "               "))
				}
			}
		}
	}
	b.WriteString("\nMetal\n")
	if !r.Metal.Available {
		fmt.Fprintf(&b, "  %s\n", r.Metal.Reason)
	} else {
		m := r.Metal
		fmt.Fprintf(&b, "  device:    %s (%s), unified memory %v, max buffer %.1f GiB, working set %.1f GiB\n",
			m.Device, m.GPUFamily, m.UnifiedMemory, float64(m.MaxBufferBytes)/(1<<30), float64(m.WorkingSet)/(1<<30))
		fmt.Fprintf(&b, "  MSL %s, %s math (read back from the compiler)\n", m.MSLVersion, m.MathMode)
	}
	fmt.Fprintf(&b, "\n--backend auto would choose %s: %s\n\nChecks\n", r.Auto.Backend, r.Auto.Reason)
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "  %-4s  %s: %s\n", strings.ToUpper(c.Status), c.Name, indent(c.Detail, "          "))
		if c.Output != "" {
			fmt.Fprintf(&b, "%s\n", indent("    "+c.Output, "    "))
		}
	}
	if r.Passed {
		b.WriteString("\nevery check that could run passed\n\n")
	} else {
		b.WriteString("\nSOME CHECKS FAILED (above)\n\n")
	}
	for _, n := range r.Next {
		fmt.Fprintf(&b, "%s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none detected"
	}
	return strings.Join(s, " ")
}

// indent indents every line of s after the first by prefix.
func indent(s, prefix string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

// doctorConformance runs the conformance suite every backend's tests run
// (engine/backend/backendtest) on be, case by case.
var doctorConformance = func(be backend.Backend) doctorCheck {
	c := doctorCheck{Name: "conformance suite on " + be.Name(), Status: checkPass}
	res := backendtest.Check(be)
	var failed, lines []string
	for _, r := range res {
		if len(r.Failures) > 0 {
			failed = append(failed, r.Name)
			for _, f := range r.Failures {
				lines = append(lines, r.Name+": "+f)
			}
		}
	}
	if len(failed) > 0 {
		c.Status = checkFail
		c.Detail = fmt.Sprintf("%d of %d cases failed: %s", len(failed), len(res), strings.Join(failed, ", "))
		c.Output = strings.Join(lines, "\n")
		return c
	}
	c.Detail = fmt.Sprintf("all %d cases pass (every op at sizes off the tile boundaries, outputs poisoned with NaN, whole programs)", len(res))
	return c
}
