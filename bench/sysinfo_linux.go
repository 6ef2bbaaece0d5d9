package bench

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// cpuModel is the first "model name" line of /proc/cpuinfo ("" on machines
// whose kernel does not give one, as many arm64 ones do not).
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// HostMemory is the memory a new allocation can have now: the kernel's
// MemAvailable, or less where a cgroup (a container's limit) allows less.
func HostMemory() (Memory, bool) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return Memory{}, false
	}
	avail, ok := meminfoAvailable(string(data))
	if !ok {
		return Memory{}, false
	}
	if limit, ok := cgroupRoom(); ok && limit < avail {
		avail = limit
	}
	return Memory{Bytes: avail, Kind: "available"}, true
}

// meminfoAvailable reads MemAvailable (in kB) from /proc/meminfo's text.
func meminfoAvailable(meminfo string) (int64, bool) {
	for line := range strings.Lines(meminfo) {
		rest, ok := strings.CutPrefix(line, "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		return kb * 1024, err == nil
	}
	return 0, false
}

// cgroupRoom is memory.max minus memory.current of this process's cgroup
// (v2), when it has a limit.
func cgroupRoom() (int64, bool) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	path, ok := strings.CutPrefix(strings.TrimSpace(string(self)), "0::")
	if !ok || strings.Contains(path, "\n") {
		return 0, false // cgroup v1 or a mixed hierarchy: not read
	}
	read := func(name string) (int64, bool) {
		b, err := os.ReadFile("/sys/fs/cgroup" + path + "/" + name)
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return v, err == nil // "max" (no limit) does not parse
	}
	limit, ok := read("memory.max")
	if !ok {
		return 0, false
	}
	used, ok := read("memory.current")
	if !ok {
		return 0, false
	}
	return max(0, limit-used), true
}
