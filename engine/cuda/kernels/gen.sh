#!/bin/sh
# gen.sh compiles each kernel source (*.cu) here to PTX (*.ptx) with clang-19,
# which needs no CUDA toolkit. Run through `go generate ./engine/cuda/kernels`;
# the .ptx files are committed and embedded in the binary, and the NVIDIA
# driver compiles them for the GPU at load.
#
# Usage: gen.sh [output directory] (default: this directory)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
clang=${CLANG:-clang-19}
if ! command -v "$clang" >/dev/null 2>&1; then
	echo "gen.sh: $clang not found (apt-get install clang-19, or set CLANG)" >&2
	exit 1
fi
# sm_90 (not sm_90a) PTX: the driver can compile it for Hopper and any newer
# GPU. Kernels that need sm_90a instructions (wgmma) have their own files.
# A source whose header says "gen.sh: sm_90a" is compiled for sm_90a.
for src in "$here"/*.cu; do
	name=$(basename "$src" .cu)
	arch=sm_90
	if head -8 "$src" | grep -q 'gen.sh: sm_90a'; then arch=sm_90a; fi
	(cd "$here" && "$clang" -x cuda --cuda-device-only -nocudainc -nocudalib \
		--cuda-gpu-arch=$arch -Xclang -target-feature -Xclang +ptx80 \
		-O3 -S -o "$out/$name.ptx" "$name.cu")
done
# clock/*.cu: a family built with PETAL_CLOCK (device.h's PETAL_MARK records
# the time blocks reach points of their kernels), for measurements; read
# from disk by them, not embedded.
mkdir -p "$out/clock"
for src in "$here"/clock/*.cu; do
	[ -e "$src" ] || continue
	name=$(basename "$src" .cu)
	(cd "$here/clock" && "$clang" -x cuda --cuda-device-only -nocudainc -nocudalib \
		--cuda-gpu-arch=sm_90 -Xclang -target-feature -Xclang +ptx80 \
		-O3 -S -o "$out/clock/$name.ptx" "$name.cu")
done
