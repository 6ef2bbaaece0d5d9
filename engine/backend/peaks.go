package backend

// Peaks is a backend that can measure the two ceilings its speed is held
// against: how fast it reads memory and how fast it multiplies matrices.
// petal bench measures both in the same run as the speeds, and reports each
// speed as a share of the floor they set (a decoded token must read its
// weights and cache; a prefilled token must do its matrix work).
type Peaks interface {
	// ReadBandwidth is the rate, in bytes per second, of a plain streaming
	// read of a buffer much larger than the caches, every core or
	// multiprocessor reading its own part at once: the best a kernel that
	// reads each weight byte once can do. A measurement of well under a
	// second; the backend says in its docs what it reads and how long.
	ReadBandwidth() (bytesPerSecond float64, err error)
	// MatrixRate is the rate, in floating-point operations per second
	// (a multiply-add counts two), of the backend's own kernel for prefill's
	// projections on a large problem: the ceiling prefill's matrix work
	// runs against. The backend's docs name the kernel, the shape, the
	// element types and the time it takes (at most a few seconds).
	MatrixRate() (flopsPerSecond float64, err error)
}

// LaunchCounter is a backend that runs a program as separate kernel
// launches and can count them: the number of launches of one decode step
// is what a step costs in latency when each waits for the last.
type LaunchCounter interface {
	// Kernels is the number of kernel launches of one Run of p, a program
	// this backend compiled (0 for another backend's).
	Kernels(p Program) int
}

// DeviceMemory is a backend with memory of its own (a GPU's): how much of
// it is in use, to report the most a run held.
type DeviceMemory interface {
	// DeviceMemoryUsed is the memory in use on the device now, in bytes,
	// by every user of it (the driver's total less its free).
	DeviceMemoryUsed() (int64, error)
}
