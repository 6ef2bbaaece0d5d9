#!/bin/sh
# check.sh: the Linux checks of petal's Metal kernels (CI; needs clang-19 and
# Go). No Metal compiler runs on Linux, so:
#  1. every .metal is syntax- and type-checked by clang-19 in OpenCL C++ mode
#     with clcpp/metal_stdlib (Metal's address spaces, types and built-ins):
#     a threadgroup pointer where a device pointer is expected, a
#     threadgroup variable outside kernel scope, a built-in Metal lacks,
#     float64 (Apple GPUs have none), a misspelt attribute all fail here,
#     and params.h's static_asserts run;
#  2. every .metal compiles unchanged as CUDA to PTX (cuda.sh, through the
#     dialect header cuda/metal_stdlib), static_asserts again, the PTX
#     calls no external function (the driver could not load it), and it is
#     the PTX engine/metal/cudarun embeds (go generate ./engine/metal/cudarun);
#  3. the Go tests: parameter structs against params.h, the Objective-C
#     selector table, metal2cu, the inlined sources.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
clang=${CLANG:-clang-19}
if ! command -v "$clang" >/dev/null 2>&1; then
	echo "check.sh: $clang not found (apt-get install clang-19, or set CLANG)" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0

# The attributes Metal defines that the kernels use; clang warns that it
# ignores them, and any other warning fails the check.
attrs='buffer|thread_position_in_threadgroup|threadgroup_position_in_grid|threads_per_threadgroup|threadgroups_per_grid|thread_position_in_grid|threads_per_grid|thread_index_in_simdgroup|simdgroup_index_in_threadgroup|threads_per_simdgroup|simdgroups_per_threadgroup'
for src in "$here"/*.metal; do
	name=$(basename "$src")
	if ! "$clang" -x clcpp -cl-std=clc++2021 -cl-no-stdinc -Xclang -cl-ext=-cl_khr_fp64,-__opencl_c_fp64 -fsyntax-only -I "$here/clcpp" "$src" 2>"$tmp/log"; then
		echo "check.sh: $name does not type-check as Metal (OpenCL C++ mode):" >&2
		grep -vE "unknown attribute '($attrs)' ignored" "$tmp/log" >&2 || true
		status=1
		continue
	fi
	if grep 'warning:' "$tmp/log" | grep -vE "unknown attribute '($attrs)' ignored" | grep -q .; then
		echo "check.sh: $name has warnings:" >&2
		grep 'warning:' "$tmp/log" | grep -vE "unknown attribute '($attrs)' ignored" >&2 || true
		status=1
	fi
done

if sh "$here/cuda.sh" "$tmp/cuda" >"$tmp/cuda.log" 2>&1; then
	for ptx in "$tmp"/cuda/*.ptx; do
		if grep -q '\.extern' "$ptx"; then
			echo "check.sh: $(basename "$ptx" .ptx).metal as CUDA calls an external function:" >&2
			grep '\.extern' "$ptx" >&2
			status=1
		fi
		# The PTX that engine/metal/cudarun embeds and runs on a GPU must be
		# what the sources make now.
		name=$(basename "$ptx" .ptx)
		if [ ! -f "$repo/engine/metal/cudarun/ptx/$name.ptx" ]; then
			echo "check.sh: engine/metal/cudarun/ptx/$name.ptx is missing: run go generate ./engine/metal/cudarun" >&2
			status=1
		elif ! cmp -s "$ptx" "$repo/engine/metal/cudarun/ptx/$name.ptx"; then
			echo "check.sh: engine/metal/cudarun/ptx/$name.ptx is out of date with $name.metal: run go generate ./engine/metal/cudarun" >&2
			diff -u "$repo/engine/metal/cudarun/ptx/$name.ptx" "$ptx" | head -20 >&2 || true
			status=1
		fi
	done
	for ptx in "$repo"/engine/metal/cudarun/ptx/*.ptx; do
		name=$(basename "$ptx" .ptx)
		if [ ! -f "$here/$name.metal" ]; then
			echo "check.sh: engine/metal/cudarun/ptx/$name.ptx has no source $name.metal" >&2
			status=1
		fi
	done
else
	echo "check.sh: the Metal sources do not compile as CUDA (cuda.sh):" >&2
	cat "$tmp/cuda.log" >&2
	status=1
fi

(cd "$repo" && CGO_ENABLED=0 go test ./engine/metal/...) || status=1
for target in darwin/arm64 linux/amd64; do
	(cd "$repo" && CGO_ENABLED=0 GOOS=${target%/*} GOARCH=${target#*/} go vet ./engine/metal/...) || status=1
done
exit $status
