package device

import "errors"

// ErrUnsupported is what Open returns on a system without Metal.
var ErrUnsupported = errors.New("metal: Metal is only available on macOS with Apple silicon")

// MaxBuffers is the most buffers one kernel may bind (Metal's limit is 31
// argument-table entries per stage).
const MaxBuffers = 31

// PageSize is the page size of Apple silicon (16 KiB): no-copy buffers must
// start and end on it.
const PageSize = 16 << 10
