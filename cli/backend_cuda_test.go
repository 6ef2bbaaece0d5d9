package cli

import (
	"strings"
	"testing"

	"petal/engine/cuda/driver"
)

// TestBackendCUDA: --backend cuda reaches the CUDA backend: a bad option is
// a usage error naming it; on a machine without a usable GPU the error says
// why (exit 2); --help lists the cuda options.
func TestBackendCUDA(t *testing.T) {
	code, _, errs := runMain(t, Streams{}, "bench", "--synthetic", "tiny", "--lengths", "256", "--backend", "cuda:kv=f16")
	if code != 2 || !strings.Contains(errs, "kv=") {
		t.Errorf("cuda:kv=f16: exit %d, stderr %q", code, errs)
	}
	if _, err := driver.Devices(); driver.Unavailable(err) {
		code, _, errs := runMain(t, Streams{}, "bench", "--synthetic", "tiny", "--lengths", "256", "--backend", "cuda")
		if code != 2 || !strings.Contains(errs, "--backend cuda: cuda: ") {
			t.Errorf("no GPU here: exit %d, stderr %q, want exit 2 with the driver's reason", code, errs)
		}
		t.Logf("without a GPU: %s", strings.TrimSpace(errs))
	}
	_, out, _ := runMain(t, Streams{}, "run", "--help")
	for _, want := range []string{"cuda", "graphs=on|off", "qmv=exact|fast", "device=N"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --help lacks %q", want)
		}
	}
}
