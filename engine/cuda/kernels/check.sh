#!/bin/sh
# check.sh fails when the committed PTX differs from what gen.sh makes from
# the kernel sources now: run it in CI (it needs clang-19).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sh "$here/gen.sh" "$tmp"
status=0
for src in "$here"/*.cu; do
	name=$(basename "$src" .cu)
	if [ ! -f "$here/$name.ptx" ]; then
		echo "check.sh: engine/cuda/kernels/$name.ptx is missing: run go generate ./engine/cuda/kernels" >&2
		status=1
	elif ! cmp -s "$tmp/$name.ptx" "$here/$name.ptx"; then
		echo "check.sh: engine/cuda/kernels/$name.ptx is out of date with $name.cu: run go generate ./engine/cuda/kernels" >&2
		diff -u "$here/$name.ptx" "$tmp/$name.ptx" | head -20 >&2 || true
		status=1
	fi
done
for src in "$here"/clock/*.cu; do
	[ -e "$src" ] || continue
	name=$(basename "$src" .cu)
	if ! cmp -s "$tmp/clock/$name.ptx" "$here/clock/$name.ptx"; then
		echo "check.sh: engine/cuda/kernels/clock/$name.ptx is out of date with clock/$name.cu: run go generate ./engine/cuda/kernels" >&2
		status=1
	fi
done
for ptx in "$here"/*.ptx; do
	name=$(basename "$ptx" .ptx)
	if [ ! -f "$here/$name.cu" ]; then
		echo "check.sh: engine/cuda/kernels/$name.ptx has no source $name.cu" >&2
		status=1
	fi
done
exit $status
