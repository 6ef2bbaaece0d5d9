package driver

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"petal/engine/cuda/kernels"
)

// TestErrorNamesCallLabelAndCode: a driver error says what failed, for what,
// and the CUDA error's name.
func TestErrorNamesCallLabelAndCode(t *testing.T) {
	e := &Error{Call: "cuMemAlloc", Label: "L3.attn.q_proj", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Desc: "out of memory"}
	want := "cuda: L3.attn.q_proj: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"
	if e.Error() != want {
		t.Fatalf("got %q, want %q", e.Error(), want)
	}
}

// TestOpenWithoutCUDAIsClear runs where there is no usable GPU (CI): Open
// must say why in words, and Unavailable must recognise it.
func TestOpenWithoutCUDAIsClear(t *testing.T) {
	c, err := Open(0)
	if err == nil {
		c.Close()
		t.Skip("this machine has a usable GPU")
	}
	t.Log(err)
	if errors.Is(err, ErrGPUTooOld) {
		if !strings.Contains(err.Error(), "compute capability") {
			t.Fatalf("an old GPU's error does not name what was found: %v", err)
		}
		return
	}
	if !Unavailable(err) {
		t.Fatalf("Open failed with an error Unavailable does not recognise: %v", err)
	}
	switch runtime.GOOS {
	case "linux":
		if !strings.Contains(err.Error(), "libcuda") && !strings.Contains(err.Error(), "no NVIDIA GPU") {
			t.Fatalf("error names neither the driver library nor the GPU: %v", err)
		}
	default:
		if !errors.Is(err, ErrUnsupportedOS) || !strings.Contains(err.Error(), "only available on Linux") {
			t.Fatalf("on %s: %v", runtime.GOOS, err)
		}
	}
}

var (
	gpuOnce sync.Once
	gpuCtx  *Context
	gpuErr  error
)

// gpu returns the test GPU's context, or skips where there is none;
// PETAL_CUDA_REQUIRE=1 makes that a failure.
func gpu(t *testing.T) *Context {
	t.Helper()
	gpuOnce.Do(func() { gpuCtx, gpuErr = Open(0) })
	if gpuErr != nil {
		if Unavailable(gpuErr) && os.Getenv("PETAL_CUDA_REQUIRE") == "" {
			t.Skipf("no CUDA GPU here, skipping (%v)", gpuErr)
		}
		t.Fatal(gpuErr)
	}
	return gpuCtx
}

func probe(t *testing.T, c *Context) *Module {
	t.Helper()
	ptx, err := kernels.PTX("probe")
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.LoadModule(ptx, "probe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func stream(t *testing.T, c *Context) *Stream {
	t.Helper()
	s, err := c.NewStream(t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func alloc(t *testing.T, c *Context, n int64) Ptr {
	t.Helper()
	p, err := c.Alloc(n, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Free(p) })
	return p
}

func f32bytes(f []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f)) }

func TestDeviceIsHopperOrNewer(t *testing.T) {
	c := gpu(t)
	d := c.Device()
	t.Log(d, "driver API", d.DriverAPI, "L2", d.L2, "shared opt-in", d.SharedOptIn)
	if d.Major < MinComputeMajor || d.SMs < 1 || d.Memory < 1<<30 || d.Name == "" {
		t.Fatalf("implausible device: %+v", d)
	}
	free, total, err := c.MemInfo()
	if err != nil || free <= 0 || total < free {
		t.Fatalf("MemInfo: %d free of %d, %v", free, total, err)
	}
}

// TestCopyRoundTrip: host → device → device → host, pageable and pinned,
// from goroutines that are not locked to a thread.
func TestCopyRoundTrip(t *testing.T) {
	c := gpu(t)
	s := stream(t, c)
	const n = 1<<20 + 3
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(rand.Uint32())
	}
	a, b := alloc(t, c, n), alloc(t, c, n)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.CopyToDevice(a, src); err != nil {
			t.Error(err)
		}
		if err := s.Copy(b, a, n); err != nil {
			t.Error(err)
		}
	}()
	wg.Wait()
	pinned, err := c.AllocHost(n, "readback")
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Free()
	if err := s.CopyToHost(pinned.Bytes, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pinned.Bytes, src) {
		t.Fatal("data changed on the round trip")
	}
}

// TestUploaderChunks: an upload longer than, and not a multiple of, the
// staging buffers arrives whole.
func TestUploaderChunks(t *testing.T) {
	c := gpu(t)
	s := stream(t, c)
	up, err := c.NewUploader(s, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	for _, n := range []int{1, 1 << 16, 5<<16 + 17} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rand.Uint32())
		}
		dst := alloc(t, c, int64(n))
		if err := up.Upload(dst, src); err != nil {
			t.Fatal(err)
		}
		want := bytes.Clone(src)
		clear(src) // the data is staged: the source may be reused at once
		got := make([]byte, n)
		if err := s.CopyToHost(got, dst); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: upload differs", n)
		}
	}
}

// TestLaunchAndGraphReplay: a kernel launched directly and a captured graph
// of three launches replayed five times add what they should, and capture
// runs nothing by itself.
func TestLaunchAndGraphReplay(t *testing.T) {
	for _, programmatic := range []bool{false, true} {
		t.Run(fmt.Sprintf("programmatic=%v", programmatic), func(t *testing.T) { launchAndReplay(t, programmatic) })
	}
}

// launchAndReplay is TestLaunchAndGraphReplay with plain launches or with
// programmatic stream serialization (each add waits for the one before).
func launchAndReplay(t *testing.T, programmatic bool) {
	c := gpu(t)
	s := stream(t, c)
	s.SetProgrammatic(programmatic)
	add, err := probe(t, c).Function("add_f32")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	y := alloc(t, c, 4*n)
	if err := s.Fill32(y, math.Float32bits(1), n); err != nil {
		t.Fatal(err)
	}
	var args Args
	args.Ptr(y).F32(0.5).I32(n)
	grid := D1((n + 127) / 128)
	if err := s.Launch(add, grid, D1(128), 0, &args); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Launch(add, grid, D1(128), 0, args.Reset().Ptr(y).F32(2).I32(n)); err != nil {
			t.Fatal(err)
		}
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	x, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	got := make([]float32, n)
	if err := s.CopyToHost(f32bytes(got), y); err != nil {
		t.Fatal(err)
	}
	if got[0] != 1.5 || got[n-1] != 1.5 {
		t.Fatalf("after one launch and a capture: %v, %v; want 1.5", got[0], got[n-1])
	}
	for range 5 {
		if err := x.Launch(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CopyToHost(f32bytes(got), y); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 31.5 {
			t.Fatalf("y[%d] = %v after 5 replays of 3 adds of 2, want 31.5", i, v)
		}
	}
}

// TestLaunchErrorNamesKernel: an impossible launch is refused with the
// kernel's name and the CUDA error's name.
func TestLaunchErrorNamesKernel(t *testing.T) {
	c := gpu(t)
	s := stream(t, c)
	empty, err := probe(t, c).Function("empty")
	if err != nil {
		t.Fatal(err)
	}
	err = s.Launch(empty, D1(1), D1(4096), 0, nil)
	var ce *Error
	if !errors.As(err, &ce) || ce.Label != "empty" || ce.Name != "CUDA_ERROR_INVALID_VALUE" {
		t.Fatalf("launch of 4096 threads: %v", err)
	}
	t.Log(err)
}

// TestBadPTXGivesCompilerLog: PTX the driver cannot compile is refused with
// the label and the JIT compiler's message.
func TestBadPTXGivesCompilerLog(t *testing.T) {
	c := gpu(t)
	bad := []byte(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { bogus.instruction; }\n")
	_, err := c.LoadModule(bad, "broken")
	if err == nil || !strings.Contains(err.Error(), "broken") || !strings.Contains(err.Error(), "CUDA_ERROR_INVALID_PTX") ||
		!strings.Contains(err.Error(), "bogus") {
		t.Fatalf("bad PTX: %v", err)
	}
	t.Log(err)
	if _, err := probe(t, c).Function("no_such_kernel"); err == nil || !strings.Contains(err.Error(), "no_such_kernel") {
		t.Fatalf("missing kernel: %v", err)
	}
}

// TestOutOfMemorySaysHowMuch: an allocation larger than the GPU fails with
// the label, the CUDA error name and the memory free.
func TestOutOfMemorySaysHowMuch(t *testing.T) {
	c := gpu(t)
	_, err := c.Alloc(1<<50, "KV cache")
	if err == nil || !strings.Contains(err.Error(), "KV cache") || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") ||
		!strings.Contains(err.Error(), "MiB free") {
		t.Fatalf("1 PiB allocation: %v", err)
	}
	t.Log(err)
}

// TestEventsTime: events around real work measure a positive time.
func TestEventsTime(t *testing.T) {
	c := gpu(t)
	s := stream(t, c)
	p := alloc(t, c, 256<<20)
	a, _ := c.NewEvent()
	b, _ := c.NewEvent()
	defer a.Close()
	defer b.Close()
	if err := a.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Fill32(p, 7, 64<<20); err != nil {
		t.Fatal(err)
	}
	if err := b.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	d, err := Elapsed(a, b)
	if err != nil || d <= 0 {
		t.Fatalf("elapsed %v, %v", d, err)
	}
	t.Logf("256 MiB fill: %v", d)
}

// TestLaunchConfigLayout: the launch configuration and attribute have
// cuda.h's sizes and offsets (CUlaunchConfig 56 bytes with hStream at 32,
// attrs at 40 and numAttrs at 48; CUlaunchAttribute 72 bytes, its value
// at 8).
func TestLaunchConfigLayout(t *testing.T) {
	var c launchConfig
	var a launchAttribute
	got := []uintptr{unsafe.Sizeof(c), unsafe.Offsetof(c.shared), unsafe.Offsetof(c.stream), unsafe.Offsetof(c.attrs), unsafe.Offsetof(c.numAttrs),
		unsafe.Sizeof(a), unsafe.Offsetof(a.value)}
	want := []uintptr{56, 24, 32, 40, 48, 72, 8}
	if !slices.Equal(got, want) {
		t.Errorf("sizes and offsets %v, want %v", got, want)
	}
}

// TestLaunchClusterRefusesBadShapes: a cluster that does not divide the
// grid, of no blocks, or of more than the portable MaxClusterBlocks is
// refused before the driver is asked, with the kernel and shapes named.
func TestLaunchClusterRefusesBadShapes(t *testing.T) {
	s := &Stream{}
	f := &Function{Name: "k"}
	for _, c := range []struct{ grid, cluster Dim3 }{
		{D1(12), D1(5)}, {D1(12), Dim3{0, 1, 1}}, {D1(32), D1(16)}, {Dim3{4, 3, 1}, Dim3{2, 2, 1}},
	} {
		err := s.LaunchCluster(f, c.grid, D1(32), c.cluster, 0, nil)
		if err == nil || !strings.Contains(err.Error(), "k: clusters of") {
			t.Errorf("grid %v, clusters of %v: %v", c.grid, c.cluster, err)
		}
	}
}

// TestClusterLaunch: probe.cu's cluster_sum in clusters of 1, 2, 4 and 8
// blocks, launched plainly, with programmatic stream serialization and
// replayed from a graph: every block's cluster rank is its index modulo the
// cluster, and what it read from each block of its cluster through
// distributed shared memory is theirs (out poisoned first).
func TestClusterLaunch(t *testing.T) {
	c := gpu(t)
	sum, err := probe(t, c).Function("cluster_sum")
	if err != nil {
		t.Fatal(err)
	}
	const blocks = 48
	out := alloc(t, c, 4*4*blocks)
	for _, programmatic := range []bool{false, true} {
		for _, graph := range []bool{false, true} {
			for _, n := range []int{1, 2, 4, 8} {
				s := stream(t, c)
				s.SetProgrammatic(programmatic)
				if err := s.Fill32(out, 0x7FFFFFF0, 4*blocks); err != nil {
					t.Fatal(err)
				}
				var args Args
				launch := func() error { return s.LaunchCluster(sum, D1(blocks), D1(64), D1(n), 0, args.Reset().Ptr(out)) }
				if graph {
					if err := s.BeginCapture(); err != nil {
						t.Fatal(err)
					}
					if err := launch(); err != nil {
						t.Fatal(err)
					}
					g, err := s.EndCapture()
					if err != nil {
						t.Fatal(err)
					}
					x, err := g.Instantiate()
					if err != nil {
						t.Fatal(err)
					}
					if err := x.Launch(s); err != nil {
						t.Fatal(err)
					}
					x.Close()
					g.Close()
				} else if err := launch(); err != nil {
					t.Fatal(err)
				}
				got := make([]int32, 4*blocks)
				if err := s.CopyToHost(unsafe.Slice((*byte)(unsafe.Pointer(&got[0])), 4*len(got)), out); err != nil {
					t.Fatal(err)
				}
				for b := range blocks {
					first := b / n * n
					want := []int32{int32(b % n), int32(n), int32(n * (n - 1) / 2), int32(n*first + n*(n-1)/2)}
					if !slices.Equal(got[4*b:4*b+4], want) {
						t.Fatalf("programmatic %v, graph %v, clusters of %d: block %d has (rank, size, ranks, blocks) %v, want %v",
							programmatic, graph, n, b, got[4*b:4*b+4], want)
					}
				}
			}
		}
	}
}

// TestMaxActiveClusters: the GPU holds some clusters of 1 to 8 blocks of
// probe.cu's cluster_sum at once, at least as many blocks in clusters of 1
// as in clusters of 8 (a cluster's blocks must all fit one GPU processing
// cluster), and no more clusters of 8 than its multiprocessors could
// hold blocks.
func TestMaxActiveClusters(t *testing.T) {
	c := gpu(t)
	sum, err := probe(t, c).Function("cluster_sum")
	if err != nil {
		t.Fatal(err)
	}
	perSM, err := sum.BlocksPerSM(64, 0)
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[int]int{}
	for _, n := range []int{1, 2, 4, 8} {
		clusters, err := sum.MaxActiveClusters(64, n, 0)
		if err != nil {
			t.Fatal(err)
		}
		if clusters < 1 || clusters*n > c.Device().SMs*perSM {
			t.Errorf("%d clusters of %d blocks at once, on %d multiprocessors of %d blocks", clusters, n, c.Device().SMs, perSM)
		}
		blocks[n] = clusters * n
		t.Logf("clusters of %d: %d at once (%d blocks)", n, clusters, clusters*n)
	}
	if blocks[1] < blocks[8] {
		t.Errorf("%d blocks at once in clusters of 1, %d in clusters of 8", blocks[1], blocks[8])
	}
}
