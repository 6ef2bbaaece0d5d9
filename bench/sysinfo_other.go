//go:build !linux && !darwin

package bench

func cpuModel() string { return "" }

// HostMemory is not known on this system: the memory check is skipped.
func HostMemory() (Memory, bool) { return Memory{}, false }
