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
// with the options petal compiles with (MSL 3.1, safe math; the
// tensor-operation family MSL 4.0 where the device has Metal 4 and the
// M5's neural accelerators, else skipped), reading both back, and makes
// the pipeline of every kernel.
func probeMetal() metalReport {
	d, err := device.Open()
	if err != nil {
		return metalReport{Reason: strings.TrimPrefix(err.Error(), "metal: ")}
	}
	defer d.Close()
	r := metalReport{Available: true, Device: d.Info.Name, UnifiedMemory: d.Info.UnifiedMemory,
		MaxBufferBytes: d.Info.MaxBufferLength, WorkingSet: d.Info.WorkingSet}
	r.Selectors, r.SelectorsChecked, r.SelectorsMissing = checkSelectors(d)
	r.GPUFamily = "no MTLGPUFamilyApple family"
	if d.Info.AppleFamily > 0 {
		r.GPUFamily = fmt.Sprintf("MTLGPUFamilyApple%d", d.Info.AppleFamily)
	}
	if d.Info.Metal4 {
		r.GPUFamily += ", MTLGPUFamilyMetal4"
	}
	for _, fam := range kernels.Families() {
		l := metalLibrary{Family: fam}
		opt := device.CompileOptions{Language: device.MSL31, Math: device.MathSafe}
		if kernels.NeedsMSL4(fam) {
			// Metal 4's tensor operations (gemm=tensor), compiled as MSL 4.0
			// where the device takes them.
			if err := device.TensorOps(d.Info.AppleFamily, d.Info.Metal4); err != nil {
				l.Skipped = err.Error() + ": gemm=tensor keeps gemm=simd's kernels here"
				r.Libraries = append(r.Libraries, l)
				continue
			}
			opt.Language = device.MSL40
		}
		src, err := kernels.Source(fam)
		if err == nil {
			var lib *device.Library
			if lib, err = d.Compile(src, opt); err == nil {
				if kernels.NeedsMSL4(fam) {
					l.MSL = lib.Language.String()
				} else {
					r.MSLVersion, r.MathMode = lib.Language.String(), lib.Math.String()
				}
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

// checkSelectors asks every object petal messages whether it responds to
// each selector: a line for the report, whether it could ask, and the
// required ones missing (receiver and selector).
func checkSelectors(d *device.Device) (detail string, checked bool, missing []string) {
	rs, err := d.CheckSelectors()
	if err != nil {
		return "not checked: " + err.Error(), false, nil
	}
	var optional []string
	for _, r := range rs {
		switch {
		case r.Responds:
		case r.Optional:
			optional = append(optional, r.Selector)
		default:
			missing = append(missing, fmt.Sprintf("%s %s", r.On, r.Selector))
		}
	}
	detail = fmt.Sprintf("%d of %d selectors respond", len(rs)-len(missing)-len(optional), len(rs))
	if len(missing) > 0 {
		detail += "; missing: " + strings.Join(missing, ", ")
	}
	if len(optional) > 0 {
		detail += "; not on this macOS (optional, asked before use): " + strings.Join(optional, ", ")
	}
	return detail, true, missing
}
