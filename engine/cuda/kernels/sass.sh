#!/bin/sh
# sass.sh compiles each embedded PTX module (*.ptx here) into machine code
# (a cubin) for its target, sm_90 or sm_90a (compute capability 9.0: H100,
# H200), with the CUDA toolkit's ptxas, gzipped into sass/ beside
# sass/manifest.txt, which records the sha256 of the PTX each was made
# from. The backend loads a cubin only where that PTX is the one embedded
# (a kernel changed since is compiled by the driver from its PTX, as on any
# other GPU), so a first run on an H100 or H200 skips the driver's half a
# minute of compiling. Needs ptxas (a CUDA toolkit), which the user's
# machine never does: run it where one is, commit sass/.
#
# Usage: sass.sh [output directory] (default: sass/ here)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/sass}
ptxas=${PTXAS:-ptxas}
if ! command -v "$ptxas" >/dev/null 2>&1; then
	echo "sass.sh: $ptxas not found (a CUDA toolkit's ptxas, or set PTXAS)" >&2
	exit 1
fi
mkdir -p "$out"
version=$("$ptxas" --version | grep -o 'V[0-9][0-9.]*' | head -1)
manifest="$out/manifest.txt"
{
	echo "# family target ptx-sha256 ptxas: each cubin (<family>.<target>.cubin.gz) and the PTX it was made from (sass.sh)"
	for ptx in "$here"/*.ptx; do
		name=$(basename "$ptx" .ptx)
		target=$(sed -n 's/^\.target \([a-z0-9_]*\).*/\1/p' "$ptx" | head -1)
		"$ptxas" -arch="$target" -O3 "$ptx" -o "$out/$name.$target.cubin"
		gzip -9 -n -f "$out/$name.$target.cubin"
		echo "$name $target $(sha256sum "$ptx" | cut -d' ' -f1) $version"
	done
} > "$manifest.new"
mv "$manifest.new" "$manifest"
