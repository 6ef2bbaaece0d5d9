// Command metal2cu writes the CUDA file that compiles a .metal source
// unchanged with clang-19 (cuda.sh): the source included between
// force_cuda_host_device pragmas after the dialect header
// (../cuda/metal_stdlib), each kernel renamed metal_<name>, and one
// extern "C" __global__ <name> per kernel that takes the buffers in
// [[buffer(n)]] order (pointers as pointers, a constant reference as the
// struct by value) and passes the position attributes computed from the
// CUDA thread and block ids.
//
// Usage: metal2cu file.metal > file.cu
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: metal2cu file.metal > file.cu")
		os.Exit(2)
	}
	src, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "metal2cu:", err)
		os.Exit(1)
	}
	out, err := Generate(filepath.Base(os.Args[1]), string(src))
	if err != nil {
		fmt.Fprintf(os.Stderr, "metal2cu: %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	os.Stdout.WriteString(out)
}
