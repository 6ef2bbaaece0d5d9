package device

import "fmt"

// LanguageVersion is an MTLLanguageVersion: major<<16 | minor.
type LanguageVersion uint64

// MSL31 is Metal Shading Language 3.1 (macOS 14), the version petal's
// kernels are written for.
const MSL31 LanguageVersion = 3<<16 | 1

// MSL40 is Metal Shading Language 4.0 (macOS 26): tensors and the tensor
// operations of MetalPerformancePrimitives (gemm_tensor.metal only).
const MSL40 LanguageVersion = 4 << 16

func (v LanguageVersion) String() string { return fmt.Sprintf("%d.%d", v>>16, v&0xffff) }

// MathMode is an MTLMathMode.
type MathMode int64

const (
	MathSafe    MathMode = 0 // IEEE-conforming results, no reassociation
	MathRelaxed MathMode = 1
	MathFast    MathMode = 2 // Metal's default when nothing is set
)

func (m MathMode) String() string {
	switch m {
	case MathSafe:
		return "safe"
	case MathRelaxed:
		return "relaxed"
	case MathFast:
		return "fast"
	}
	return fmt.Sprintf("MTLMathMode(%d)", int64(m))
}

// CompileOptions are what petal sets on every compile; both are read back.
type CompileOptions struct {
	Language LanguageVersion
	Math     MathMode
}

// Size is a grid or threadgroup size.
type Size struct{ X, Y, Z int }

func (s Size) mtl() mtlSize { return mtlSize{uint64(s.X), uint64(s.Y), uint64(s.Z)} }

func (s Size) valid() bool { return s.X > 0 && s.Y > 0 && s.Z > 0 }

func (s Size) threads() int { return s.X * s.Y * s.Z }
