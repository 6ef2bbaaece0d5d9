package checkpoint

import "fmt"

// DType is a safetensors element type name.
type DType string

// The element types a checkpoint may hold. Anything else (F8_E4M3, I64, ...)
// is rejected when the file is opened.
const (
	U32  DType = "U32"  // packed quantised codes
	BF16 DType = "BF16" // weights, scales, biases
	F16  DType = "F16"
	F32  DType = "F32" // A_log in Qwen3.5 conversions, reference tensors
	I32  DType = "I32" // token ids in reference files
)

const supportedDTypes = "U32, BF16, F16, F32, I32"

// Size is the number of bytes of one element, or 0 for an unsupported type.
func (d DType) Size() int {
	switch d {
	case U32, F32, I32:
		return 4
	case BF16, F16:
		return 2
	}
	return 0
}

func checkDType(file, tensor, dtype string) (DType, error) {
	d := DType(dtype)
	if d.Size() == 0 {
		return "", fmt.Errorf("checkpoint: %s: tensor %q: dtype %s is not supported (%s)", file, tensor, dtype, supportedDTypes)
	}
	return d, nil
}
