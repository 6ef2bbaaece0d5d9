package cli

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"petal/engine/backend"
	"petal/engine/cpu"
	"petal/engine/cuda"
	"petal/engine/cuda/driver"
	"petal/engine/metal"
	"petal/engine/metal/device"
)

// standIn replaces the CUDA and Metal openers and auto's Metal rule for
// one test.
func standIn(t *testing.T, onMac bool, openCUDA func(cuda.Options) (backend.Backend, error), openMetal func(metal.Options) (backend.Backend, error)) {
	oldCUDA, oldMetal, oldAuto := newCUDA, newMetal, autoMetal
	t.Cleanup(func() { newCUDA, newMetal, autoMetal = oldCUDA, oldMetal, oldAuto })
	newCUDA, newMetal, autoMetal = openCUDA, openMetal, onMac
}

// TestAutoBackendMetal: on a Mac auto takes Metal where its device opens,
// after CUDA (which a Mac has not) and before the CPU; a device that is
// there but fails gets the CPU with a warning; off a Mac, Metal is never
// tried.
func TestAutoBackendMetal(t *testing.T) {
	gpu, mac := cpu.New(), cpu.New() // stand in for opened GPU backends
	noCUDA := func(cuda.Options) (backend.Backend, error) { return nil, driver.ErrUnsupportedOS }
	for _, tc := range []struct {
		name      string
		onMac     bool
		openCUDA  func(cuda.Options) (backend.Backend, error)
		openMetal func(metal.Options) (backend.Backend, error)
		want      backend.Backend
		warning   string
	}{
		{"a Mac", true, noCUDA, func(metal.Options) (backend.Backend, error) { return mac, nil }, mac, ""},
		{"a usable NVIDIA GPU first", true, func(cuda.Options) (backend.Backend, error) { return gpu, nil },
			func(metal.Options) (backend.Backend, error) { return mac, nil }, gpu, ""},
		{"a Mac without a Metal device", true, noCUDA, func(metal.Options) (backend.Backend, error) { return nil, device.ErrUnsupported }, nil, ""},
		{"a Metal device that fails", true, noCUDA, func(metal.Options) (backend.Backend, error) {
			return nil, fmt.Errorf("metal: ops.metal: MSL did not compile: boom")
		}, nil, "MSL did not compile"},
		{"not a Mac", false, noCUDA, func(metal.Options) (backend.Backend, error) {
			t.Error("Metal tried off a Mac")
			return mac, nil
		}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			standIn(t, tc.onMac, tc.openCUDA, tc.openMetal)
			var warnings []string
			be, err := newBackend("auto", func(m string) { warnings = append(warnings, m) })
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil && be != tc.want || tc.want == nil && be == mac {
				t.Errorf("got %s (%p), want %v", be.Name(), be, tc.want)
			}
			if got := strings.Join(warnings, "\n"); (tc.warning == "") != (got == "") || !strings.Contains(got, tc.warning) {
				t.Errorf("warnings %q, want one naming %q", got, tc.warning)
			}
		})
	}
}

// TestMetalBackendSpec: --backend metal passes its options to the Metal
// backend, refuses bad ones and a --device, and off a Mac says that Metal
// is only available there.
func TestMetalBackendSpec(t *testing.T) {
	var got metal.Options
	standIn(t, false, nil, func(o metal.Options) (backend.Backend, error) { got = o; return cpu.New(), nil })
	if _, err := newBackend("metal:kv=bf16,fused=off", nil); err != nil || got.KV != backend.BF16 || got.Fused {
		t.Errorf("metal:kv=bf16,fused=off: options %+v, %v", got, err)
	}
	for spec, want := range map[string]string{"metal:kv=f16": "the KV cache is f32 or bf16", "metal:graphs=on": `unknown option "graphs"`} {
		if _, err := newBackend(spec, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", spec, err, want)
		}
	}
	if _, err := newBackendOn("metal", gpuFlag{N: 1, Set: true}, nil); err == nil || !strings.Contains(err.Error(), "--device 1") {
		t.Errorf("metal on --device 1: %v", err)
	}
	newMetal = func(o metal.Options) (backend.Backend, error) { return metal.Open(o) }
	if runtime.GOOS != "darwin" {
		_, err := newBackend("metal", nil)
		if err == nil || err.Error() != "--backend metal: Metal is only available on macOS with Apple silicon" {
			t.Errorf("metal off a Mac: %v", err)
		}
	}
}

// TestDoctorChecksMetalAutoDoesNotPick: on a Mac, auto stays on the CPU
// (the Metal backend has not run on Apple hardware) and says why, while
// doctor still opens Metal to check it; with auto's Metal rule on, auto
// reports metal.
func TestDoctorChecksMetalAutoDoesNotPick(t *testing.T) {
	mac := cpu.New() // stands in for an opened Metal backend
	noCUDA := func(cuda.Options) (backend.Backend, error) { return nil, driver.ErrUnsupportedOS }
	openMetal := func(metal.Options) (backend.Backend, error) { return mac, nil }
	oldMac := onMac
	t.Cleanup(func() { onMac = oldMac })
	onMac = true
	standIn(t, false, noCUDA, openMetal)
	if be, err := newBackend("auto", nil); err != nil || be == mac {
		t.Errorf("auto on a Mac: %v, %v; want the CPU", be, err)
	}
	r, check := chooseAuto()
	if r.Backend != "cpu" || !strings.Contains(r.Reason, "does not pick") || check != mac {
		t.Errorf("doctor on a Mac: auto %+v, checks %v; want cpu, saying why, and metal checked", r, check)
	}
	standIn(t, true, noCUDA, openMetal)
	if r, check := chooseAuto(); r.Backend != "metal" || check != mac {
		t.Errorf("with auto's Metal rule on: %+v, %v", r, check)
	}
}
