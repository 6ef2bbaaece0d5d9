package bench

import (
	"runtime"
	"time"
)

// Machine describes where a report was measured.
type Machine struct {
	OS         string    `json:"os"`
	Arch       string    `json:"arch"`
	CPUModel   string    `json:"cpu_model,omitempty"`
	CPUs       int       `json:"cpus"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	GoVersion  string    `json:"go_version"`
	Backend    string    `json:"backend"`
	Date       time.Time `json:"date"`
}

// DescribeMachine describes this machine running the named backend, now.
func DescribeMachine(backend string) Machine {
	return Machine{
		OS: runtime.GOOS, Arch: runtime.GOARCH, CPUModel: cpuModel(),
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		Backend: backend, Date: time.Now().UTC().Truncate(time.Second),
	}
}
