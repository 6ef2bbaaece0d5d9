#!/bin/sh
# gen.sh writes ptx/NAME.ptx for each engine/metal/kernels/NAME.metal: the
# Metal source compiled unchanged as CUDA through the dialect header
# (kernels/cuda.sh). Run through `go generate ./engine/metal/cudarun`; the
# .ptx files are committed and embedded, and engine/metal/kernels/check.sh
# fails when one is stale.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sh "$here/../kernels/cuda.sh" "$tmp"
mkdir -p "$here/ptx"
rm -f "$here"/ptx/*.ptx
cp "$tmp"/*.ptx "$here/ptx/"
