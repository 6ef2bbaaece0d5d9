// Package kernels holds petal's Metal kernels: MSL sources, one .metal file
// per op family with the same stem as its CUDA sibling in
// engine/cuda/kernels, the parameter structs both dialects read
// (params.h, with Go twins in params.go), and the helpers they share
// (qgroup.h). The sources are embedded; Metal compiles them at start-up.
//
// Nothing here has run on Apple hardware yet. On Linux, check.sh
// type-checks every source with clang-19 in OpenCL C++ mode against
// clcpp/metal_stdlib and compiles every source, unchanged, as CUDA through
// the dialect header cuda/metal_stdlib (cuda.sh), so the kernels can be run
// and tested on an NVIDIA GPU.
package kernels

import (
	"bufio"
	"embed"
	"fmt"
	"path"
	"sort"
	"strings"
)

//go:embed *.metal *.h
var sources embed.FS

// Source returns family's MSL source (e.g. "qmv") ready for Metal's
// run-time compiler, which sees one string and no files: the local includes
// (#include "params.h") inlined, each file once, with #line directives so
// that compiler messages name the original file and line. <metal_stdlib>
// stays an include.
func Source(family string) (string, error) {
	name := family + ".metal"
	if _, err := sources.Open(name); err != nil {
		return "", fmt.Errorf("kernels: no Metal source for %q (families: %s)", family, strings.Join(Families(), ", "))
	}
	var b strings.Builder
	if err := inline(&b, name, map[string]bool{}); err != nil {
		return "", err
	}
	return b.String(), nil
}

func inline(b *strings.Builder, name string, done map[string]bool) error {
	if done[name] {
		return nil
	}
	done[name] = true
	data, err := sources.ReadFile(name)
	if err != nil {
		return fmt.Errorf("kernels: %s is included but not embedded", name)
	}
	fmt.Fprintf(b, "#line 1 %q\n", name)
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		switch {
		case trimmed == "#pragma once":
			b.WriteString("\n")
		case strings.HasPrefix(trimmed, "#include \""):
			inc := strings.TrimSuffix(strings.TrimPrefix(trimmed, "#include \""), "\"")
			if inc == "" || strings.ContainsAny(inc, "\"/") || path.Ext(inc) != ".h" {
				return fmt.Errorf("kernels: %s:%d: only local headers (name.h) can be inlined: %s", name, line, trimmed)
			}
			if err := inline(b, inc, done); err != nil {
				return err
			}
			fmt.Fprintf(b, "#line %d %q\n", line+1, name)
		default:
			b.WriteString(text)
			b.WriteString("\n")
		}
	}
	return sc.Err()
}

// Families lists the kernel families embedded, sorted.
func Families() []string {
	entries, _ := sources.ReadDir(".")
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".metal"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// TensorFamily is the family on Metal 4's tensor operations (prefill's
// GEMMs on matmul2d, gemm=tensor).
const TensorFamily = "gemm_tensor"

// NeedsMSL4 reports whether family's source uses Metal 4's tensors and so
// compiles only as MSL 4.0, on a device in MTLGPUFamilyMetal4; every other
// family is written for MSL 3.1.
func NeedsMSL4(family string) bool { return family == TensorFamily }
