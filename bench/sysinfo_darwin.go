package bench

import "golang.org/x/sys/unix"

func cpuModel() string {
	s, _ := unix.Sysctl("machdep.cpu.brand_string")
	return s
}

// HostMemory on macOS is the installed memory (hw.memsize): Apple silicon
// shares it between CPU and GPU, and the system pages out what is idle.
func HostMemory() (Memory, bool) {
	n, err := unix.SysctlUint64("hw.memsize")
	if err != nil {
		return Memory{}, false
	}
	return Memory{Bytes: int64(n), Kind: "installed"}, true
}
