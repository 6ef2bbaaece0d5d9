package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"petal/engine/cuda/driver"
	"petal/engine/quant"
)

// peakLaunches is how many timed launches each ceiling takes the median of
// (after peakWarmups untimed ones).
const peakLaunches, peakWarmups = 10, 3

// readBytes is the buffer ReadBandwidth reads: 1 GiB, some twenty times
// the H200's 50 MB L2.
const readBytes = 1 << 30

// ReadBandwidth (backend.Peaks) launches read_xor (kernels/probe.cu: a
// streaming read with the decode mat-vec's 16-byte ld.global.nc load, 8
// blocks of 256 threads per multiprocessor) over 1 GiB, ten times after
// three untimed launches, each timed between two events; the median in
// bytes per second. About 3 ms of GPU time (4.4-4.5 TB/s on the H200:
// docs/bench/cuda/README.md), plus loading the probe module.
func (b *Backend) ReadBandwidth() (float64, error) {
	if err := b.s.Sync(); err != nil {
		return 0, err
	}
	mod, err := loadFamily(b.ctx, "probe")
	if err != nil {
		return 0, err
	}
	defer mod.Close()
	read, err := mod.Function("read_xor")
	if err != nil {
		return 0, err
	}
	src, err := b.ctx.Alloc(readBytes, "read bandwidth source")
	if err != nil {
		return 0, err
	}
	defer b.ctx.Free(src)
	dst, err := b.ctx.Alloc(1<<20, "read bandwidth sink")
	if err != nil {
		return 0, err
	}
	defer b.ctx.Free(dst)
	if err := b.s.Fill32(src, 0x3f800001, readBytes/4); err != nil {
		return 0, err
	}
	var args driver.Args
	args.Ptr(src).I64(readBytes / 16).Ptr(dst)
	grid := b.ctx.Device().SMs * 8
	d, err := b.medianLaunch(func() error { return b.s.Launch(read, driver.D1(grid), driver.D1(256), 0, &args) })
	if err != nil {
		return 0, fmt.Errorf("cuda: measuring the read bandwidth: %w", err)
	}
	return readBytes / d.Seconds(), nil
}

// rateN and rateK are MatrixRate's weight shape; rateM its largest number
// of rows (8192×8192×8192: 1.1 TFLOP a launch).
const rateN, rateK, rateM = 8192, 8192, 8192

// MatrixRate (backend.Peaks) times the tensor-core GEMM of prefill's dense
// projections (gemm.go's Dense: bf16 activations, 4-bit weights
// dequantised to bf16 in the tile loads, float32 sums) on a random 4-bit
// 8192×8192 weight matrix against 8192 random bf16 rows (fewer, halving,
// where less than twice the buffers is free), the tile DenseTile picks,
// ten times after three untimed launches; the median in FLOP per second
// (2·M·N·K a launch). This is petal's own kernel, which also does the
// dequantisation: a lower bound of the chip's dense bf16 rate (cuBLAS
// reached 778 TFLOP/s there). It takes a second or two, most of it making
// and uploading the random inputs (32 MB of codes, 128 MB of rows).
func (b *Backend) MatrixRate() (float64, error) {
	if err := b.s.Sync(); err != nil {
		return 0, err
	}
	g := b.gemm
	if g == nil { // gemm=plain: the kernels are not loaded
		mod, err := LoadGEMMModule(b.ctx)
		if err != nil {
			return 0, err
		}
		defer mod.Close()
		if g, err = NewGEMM(b.ctx, mod); err != nil {
			return 0, err
		}
		if err := g.Prepare(); err != nil {
			return 0, err
		}
	}
	free, _, err := b.ctx.MemInfo()
	if err != nil {
		return 0, err
	}
	M := rateM
	for M > 512 && 2*int64(M)*(2*rateK+4*rateN) > free {
		M /= 2
	}
	rng := rand.New(rand.NewPCG(1, 2))
	m := quant.RandomMatrix(rng, 1, rateN, rateK, 4, 64)
	qm, err := UploadQMatrix(b.ctx, b.up, &m, "matrix rate weights")
	if err != nil {
		return 0, err
	}
	defer qm.Free()
	if err := qm.UploadScaleBias(b.up, &m); err != nil {
		return 0, err
	}
	x, err := b.ctx.Alloc(int64(M)*rateK*2, "matrix rate rows (bf16)")
	if err != nil {
		return 0, err
	}
	defer b.ctx.Free(x)
	y, err := b.ctx.Alloc(int64(M)*rateN*4, "matrix rate output")
	if err != nil {
		return 0, err
	}
	defer b.ctx.Free(y)
	host := make([]byte, M*rateK*2)
	for i := 0; i < len(host); i += 2 { // bf16 of U(-1, 1)
		bits := quant.ToBF16(2*rng.Float32() - 1)
		host[i], host[i+1] = byte(bits), byte(bits>>8)
	}
	if err := b.s.CopyToDevice(x, host); err != nil {
		return 0, err
	}
	tile := g.DenseTile(M, rateN)
	d, err := b.medianLaunch(func() error { return g.Dense(b.s, tile, qm, x, y, M) })
	if err != nil {
		return 0, fmt.Errorf("cuda: measuring the matrix rate (%d×%d×%d, tile %s): %w", M, rateN, rateK, tile, err)
	}
	return 2 * float64(M) * rateN * rateK / d.Seconds(), nil
}

// medianLaunch runs launch peakWarmups times, then peakLaunches times with
// an event recorded after each, and returns the median time between
// consecutive events.
func (b *Backend) medianLaunch(launch func() error) (time.Duration, error) {
	for range peakWarmups {
		if err := launch(); err != nil {
			return 0, err
		}
	}
	ev := make([]*driver.Event, peakLaunches+1)
	for i := range ev {
		var err error
		if ev[i], err = b.ctx.NewEvent(); err != nil {
			return 0, err
		}
		defer ev[i].Close()
	}
	if err := ev[0].Record(b.s); err != nil {
		return 0, err
	}
	for i := 1; i <= peakLaunches; i++ {
		if err := launch(); err != nil {
			return 0, err
		}
		if err := ev[i].Record(b.s); err != nil {
			return 0, err
		}
	}
	if err := ev[peakLaunches].Sync(); err != nil {
		return 0, err
	}
	d := make([]time.Duration, peakLaunches)
	for i := range d {
		var err error
		if d[i], err = driver.Elapsed(ev[i], ev[i+1]); err != nil {
			return 0, err
		}
	}
	slices.Sort(d)
	return d[peakLaunches/2], nil
}

// DeviceMemoryUsed (backend.DeviceMemory) is the GPU's memory in use now,
// by this process and any other: the driver's total less its free.
func (b *Backend) DeviceMemoryUsed() (int64, error) {
	free, total, err := b.ctx.MemInfo()
	if err != nil {
		return 0, err
	}
	return total - free, nil
}
