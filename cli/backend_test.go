package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"petal/engine/backend"
	"petal/engine/cpu"
	"petal/engine/cuda"
	"petal/engine/cuda/driver"
)

// TestAutoBackend: auto is the GPU where one can be used, else the CPU:
// quietly on a machine without CUDA, with a warning that says why when a
// GPU is there but unusable; auto takes no options.
func TestAutoBackend(t *testing.T) {
	defer func(f func(cuda.Options) (backend.Backend, error)) { newCUDA = f }(newCUDA)
	gpu := cpu.New() // stands in for an opened GPU backend
	for _, tc := range []struct {
		name    string
		open    func(cuda.Options) (backend.Backend, error)
		want    backend.Backend
		warning string
	}{
		{"a usable GPU", func(cuda.Options) (backend.Backend, error) { return gpu, nil }, gpu, ""},
		{"no driver", func(cuda.Options) (backend.Backend, error) {
			return nil, fmt.Errorf("opening: %w", driver.ErrNoDriver)
		}, nil, ""},
		{"no GPU", func(cuda.Options) (backend.Backend, error) { return nil, driver.ErrNoDevice }, nil, ""},
		{"a GPU too old", func(cuda.Options) (backend.Backend, error) {
			return nil, fmt.Errorf("%w: found a Tesla V100 (compute capability 7.0)", driver.ErrGPUTooOld)
		}, nil, "Tesla V100"},
	} {
		newCUDA = tc.open
		var warnings []string
		be, err := newBackend("", func(m string) { warnings = append(warnings, m) })
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		switch {
		case tc.want != nil && be != tc.want:
			t.Errorf("%s: got %s, want the GPU", tc.name, be.Name())
		case tc.want == nil && be.Name() != "cpu":
			t.Errorf("%s: got %s, want cpu", tc.name, be.Name())
		}
		if got := strings.Join(warnings, "\n"); (tc.warning == "") != (got == "") || !strings.Contains(got, tc.warning) {
			t.Errorf("%s: warnings %q, want one naming %q", tc.name, got, tc.warning)
		}
	}
	// what the backend has to say while it opens (the driver compiling the
	// kernels on a first run) reaches the user's warnings, auto or named
	for _, spec := range []string{"auto", "cuda"} {
		newCUDA = func(o cuda.Options) (backend.Backend, error) {
			if o.Notice == nil {
				return nil, fmt.Errorf("no Notice to tell")
			}
			o.Notice("cuda: compiling petal's kernels")
			return gpu, nil
		}
		var warnings []string
		if _, err := newBackend(spec, func(m string) { warnings = append(warnings, m) }); err != nil || len(warnings) != 1 || warnings[0] != "cuda: compiling petal's kernels" {
			t.Errorf("--backend %s: warnings %q (%v), want the backend's notice", spec, warnings, err)
		}
	}
	if _, err := newBackend("auto:kv=bf16", nil); err == nil || !strings.Contains(err.Error(), "auto takes no options") {
		t.Errorf("auto with options: %v", err)
	}
}

// TestAutoBackendHere: on this machine, whatever it has, auto opens a
// backend; where CUDA is missing the real driver's error is recognised as
// "no CUDA here", so nothing is printed.
func TestAutoBackendHere(t *testing.T) {
	_, cudaErr := cuda.New(cuda.DefaultOptions())
	var warnings []string
	be, err := newBackend("auto", func(m string) { warnings = append(warnings, m) })
	if err != nil {
		t.Fatal(err)
	}
	// without CUDA: the CPU quietly, or on a Mac Metal where its device opens
	if cudaErr != nil && driver.Unavailable(cudaErr) && (be.Name() != "cpu" && !(autoMetal && be.Name() == "metal") || len(warnings) > 0) {
		t.Errorf("no CUDA here (%v): got %s and warnings %q, want cpu quietly", cudaErr, be.Name(), warnings)
	}
	if cudaErr == nil && be.Name() != "cuda" {
		t.Errorf("a usable GPU here, but auto chose %s", be.Name())
	}
	if errors.Is(cudaErr, driver.ErrGPUTooOld) && len(warnings) == 0 {
		t.Error("an unusable GPU here, but no warning")
	}
}
