package bench

import "testing"

func TestMeminfoAvailable(t *testing.T) {
	text := "MemTotal:       24000000 kB\nMemFree:         1000000 kB\nMemAvailable:   11200000 kB\nBuffers: 1 kB\n"
	if got, ok := meminfoAvailable(text); !ok || got != 11200000*1024 {
		t.Errorf("got %d %v", got, ok)
	}
	if _, ok := meminfoAvailable("MemTotal: 5 kB\n"); ok {
		t.Error("found MemAvailable where there is none")
	}
	if m, ok := HostMemory(); !ok || m.Bytes <= 0 || m.Kind != "available" {
		t.Errorf("this machine: %+v %v", m, ok)
	}
}
