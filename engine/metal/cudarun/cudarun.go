// Package cudarun holds the Metal kernels of engine/metal/kernels compiled
// unchanged as CUDA to PTX (gen.sh, through kernels/cuda.sh and the dialect
// header kernels/cuda/metal_stdlib), so that their own source runs on an
// NVIDIA GPU. Its tests launch every entry point through engine/cuda/driver
// with the params.h structs and compare with the float64 references of
// engine/backend/backendtest; they run on Linux with a GPU and skip
// elsewhere. This is not the Metal backend: nothing here runs on a Mac.
package cudarun

import (
	"embed"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

//go:generate sh gen.sh

//go:embed ptx/*.ptx
var ptxFiles embed.FS

// PTX returns the PTX made from family.metal (e.g. "qmv"), ending in the
// NUL byte the driver wants.
func PTX(family string) ([]byte, error) {
	b, err := ptxFiles.ReadFile("ptx/" + family + ".ptx")
	if err != nil {
		return nil, fmt.Errorf("cudarun: no PTX for %q (families: %s)", family, strings.Join(Families(), ", "))
	}
	return append(b[:len(b):len(b)], 0), nil
}

// Families lists the kernel families embedded, sorted.
func Families() []string {
	entries, _ := ptxFiles.ReadDir("ptx")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".ptx"))
	}
	sort.Strings(names)
	return names
}

var entryLine = regexp.MustCompile(`(?m)^\.visible \.entry ([A-Za-z_]\w*)\(`)

// Entries lists the kernel entry points of family's PTX, in file order.
func Entries(family string) ([]string, error) {
	b, err := PTX(family)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range entryLine.FindAllSubmatch(b, -1) {
		names = append(names, string(m[1]))
	}
	return names, nil
}
