package device

import "fmt"

// The MTLGPUFamily values TensorOps asks about (supportsFamily:):
// MTLGPUFamilyApple10 (the M5's GPU, whose cores each have a neural
// accelerator) and MTLGPUFamilyMetal4 (macOS 26: MSL 4.0, tensors).
const (
	familyApple10 = 1010
	familyMetal4  = 5002
)

// TensorOps says whether a device of Apple GPU family appleFamily, in
// MTLGPUFamilyMetal4 or not, takes prefill's GEMMs on Metal 4's tensor
// operations (gemm=tensor): nil where it does, else why not. Tensors
// compile on every GPU of the Metal 4 family, but only an Apple10 GPU runs
// their matrix products on the neural accelerators; elsewhere they would
// run on the same ALUs as simdgroup matrices, and gemm=simd's kernels are
// the ones checked, so those devices keep them. Whether the compiler
// builds the library at MSL 4.0 is the caller's second check.
func TensorOps(appleFamily int, metal4 bool) error {
	switch {
	case !metal4:
		return fmt.Errorf("the device is not in MTLGPUFamilyMetal4 (tensors need macOS 26 and MSL 4.0)")
	case appleFamily < familyApple10-1000:
		return fmt.Errorf("Apple GPU family %d has no neural accelerators (MTLGPUFamilyApple10, the M5, has)", appleFamily)
	}
	return nil
}
