#!/bin/sh
# cuda.sh compiles each Metal kernel source (*.metal) here as CUDA, unchanged,
# to PTX with clang-19: metal2cu writes a .cu file that includes the source
# after the dialect header cuda/metal_stdlib and adds a __global__ entry per
# kernel. The PTX is loaded with engine/cuda/driver on an NVIDIA GPU so that
# the Metal kernels' own source is tested there (check.sh only compiles).
#
# Usage: cuda.sh OUTDIR (gets NAME.cu and NAME.ptx per NAME.metal)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: cuda.sh OUTDIR}
mkdir -p "$out"
clang=${CLANG:-clang-19}
if ! command -v "$clang" >/dev/null 2>&1; then
	echo "cuda.sh: $clang not found (apt-get install clang-19, or set CLANG)" >&2
	exit 1
fi
gen="$out/metal2cu"
(cd "$here/metal2cu" && CGO_ENABLED=0 go build -o "$gen" .)
for src in "$here"/*.metal; do
	name=$(basename "$src" .metal)
	"$gen" "$src" >"$out/$name.cu"
	# The same PTX target as engine/cuda/kernels/gen.sh. Unknown-attribute
	# warnings are Metal's [[...]] attributes, which the dialect ignores
	# (metal2cu has checked each one).
	"$clang" -x cuda --cuda-device-only -nocudainc -nocudalib \
		--cuda-gpu-arch=sm_90 -Xclang -target-feature -Xclang +ptx80 \
		-Wno-unknown-attributes -Werror \
		-I "$here/cuda" -I "$here" -O3 -S -o "$out/$name.ptx" "$out/$name.cu"
done
