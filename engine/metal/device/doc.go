// Package device is petal's way to an Apple GPU: Metal.framework and the
// Objective-C runtime reached through purego (no cgo), on macOS only.
//
// It opens the system default device and one command queue, makes buffers in
// shared storage (the CPU and the GPU see the same memory on Apple silicon),
// wraps a memory-mapped checkpoint without copying it (page-aligned views
// under the device's maxBufferLength), compiles compute pipelines from MSL
// source at start-up, and runs command buffers. The traps of driving Metal
// without cgo are handled here, each where it arises:
//
//   - a CGO_ENABLED=0 Mach-O binary has no LC_BUILD_VERSION, and Metal's
//     run-time compiler then defaults to an old MSL version: the language
//     version is set on every compile and read back (Library.Language);
//   - fast math is Metal's default: the math mode is chosen on purpose and
//     read back (Library.Math);
//   - autorelease pools belong to an OS thread: every call that makes
//     autoreleased objects runs inside withPool, which locks the goroutine
//     to its thread for the pool's life;
//   - Objective-C blocks built by hand crash under pointer authentication
//     when Metal copies them: completion is awaited with waitUntilCompleted,
//     never a completion handler, and no-copy buffers get no deallocator;
//   - objc's generic Send registers a function on every call: every message
//     is a typed function bound once at load (messages.go), and buffers are
//     bound with one setBuffers:offsets:withRange: per dispatch, at most 31.
//
// Elsewhere Open returns ErrUnsupported. Nothing here has run on Apple
// hardware yet; the selector table, the view planning and the builds for
// darwin/arm64 are checked on Linux.
package device
