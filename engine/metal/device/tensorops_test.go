package device

import (
	"strings"
	"testing"
)

// TestTensorOps: tensor operations where the device is in the Metal 4
// family and an Apple10 GPU (the M5's neural accelerators), and a reason
// naming what is missing otherwise.
func TestTensorOps(t *testing.T) {
	for _, c := range []struct {
		family int
		metal4 bool
		why    string
	}{{10, true, ""}, {11, true, ""}, {9, true, "family 9 has no neural accelerators"}, {7, true, "no neural accelerators"},
		{10, false, "not in MTLGPUFamilyMetal4"}, {0, false, "not in MTLGPUFamilyMetal4"}} {
		err := TensorOps(c.family, c.metal4)
		switch {
		case c.why == "" && err != nil:
			t.Errorf("Apple%d, Metal4 %v: %v", c.family, c.metal4, err)
		case c.why != "" && (err == nil || !strings.Contains(err.Error(), c.why)):
			t.Errorf("Apple%d, Metal4 %v: %v, want it to say %q", c.family, c.metal4, err, c.why)
		}
	}
}
