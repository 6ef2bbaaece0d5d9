//go:build darwin

package cli

import (
	"fmt"
	"regexp"
	"strings"

	"petal/engine/metal/device"
	"petal/engine/metal/kernels"
)

// kernelName finds the entry points of an MSL source.
var kernelName = regexp.MustCompile(`(?m)^\s*kernel\s+void\s+(\w+)\s*\(`)

// probeMetal opens the default device and compiles every embedded library
// with the options petal compiles with (MSL 3.1, safe math), reading both
// back, and makes the pipeline of every kernel.
func probeMetal() metalReport {
	d, err := device.Open()
	if err != nil {
		return metalReport{Reason: strings.TrimPrefix(err.Error(), "metal: ")}
	}
	defer d.Close()
	r := metalReport{Available: true, Device: d.Info.Name, UnifiedMemory: d.Info.UnifiedMemory,
		MaxBufferBytes: d.Info.MaxBufferLength, WorkingSet: d.Info.WorkingSet,
		Selectors: "not checked: engine/metal/device does not export a respondsToSelector: check over its message table yet"}
	r.GPUFamily = "no MTLGPUFamilyApple family"
	if d.Info.AppleFamily > 0 {
		r.GPUFamily = fmt.Sprintf("MTLGPUFamilyApple%d", d.Info.AppleFamily)
	}
	opt := device.CompileOptions{Language: device.MSL31, Math: device.MathSafe}
	for _, fam := range kernels.Families() {
		l := metalLibrary{Family: fam}
		src, err := kernels.Source(fam)
		if err == nil {
			var lib *device.Library
			if lib, err = d.Compile(src, opt); err == nil {
				r.MSLVersion, r.MathMode = lib.Language.String(), lib.Math.String()
				l.Warnings = lib.Warnings
				for _, m := range kernelName.FindAllStringSubmatch(src, -1) {
					if _, perr := lib.Pipeline(m[1]); perr != nil {
						err = perr
						break
					}
					l.Kernels = append(l.Kernels, m[1])
				}
				lib.Release()
			}
		}
		l.Compiled = err == nil
		if err != nil {
			l.Error = err.Error()
		}
		r.Libraries = append(r.Libraries, l)
	}
	if r.MSLVersion == "" {
		r.MSLVersion, r.MathMode = "unknown (no library compiled)", "unknown"
	}
	return r
}
