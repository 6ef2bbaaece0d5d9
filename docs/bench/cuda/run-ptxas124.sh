#!/bin/bash
# run-ptxas124.sh: the machine-code checks made without a GPU with CUDA
# 12.4's ptxas (Debian trixie's, extracted: engine/cuda/kernels/regs.sh says
# how), from the repository root: PTXAS=path OUT=dir bash run-ptxas124.sh
# - registers, spills and C75xx notes of the sm_90a families as built now
#   (regs.sh), and of gemm_wg with GEMM_RA_LATE_LOAD set;
# - gemm_ws.cu as of 6d570e4 (w256rs, before its consumers' arrival was
#   made branch-free) in its four builds: as built, WS_WAIT_ASM,
#   WS_ARRIVE_ALL, both.
# Not machine code for a GPU run (the GPU machine's ptxas 13.0 builds the
# cubins): a guide, whose counts differ from 13.0's by a few registers.
set -eu
ptxas=${PTXAS:?PTXAS: CUDA 12.4 ptxas} out=${OUT:-/tmp/ptxas124} k=engine/cuda/kernels
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$ptxas" --version > "$out/version.txt"
for fam in gemm_wg gemm_fit gemm_downbf gemm_fitw gemm_ws gdn_chunk_frag attn_prefill_wg; do
	PTXAS=$ptxas sh $k/regs.sh $fam > "$out/regs-$fam.txt" 2>&1
done
cc() { # cc SRC OUT.ptx FLAGS...: clang-19 as gen.sh runs it, with FLAGS
	local src=$1 o=$2
	shift 2
	(cd "$(dirname "$src")" && clang-19 -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=sm_90a \
		-Xclang -target-feature -Xclang +ptx80 -O3 "$@" -S -o "$o" "$(basename "$src")")
}
cc $k/gemm_wg.cu "$tmp/late.ptx" -DGEMM_RA_LATE_LOAD=1
"$ptxas" -arch=sm_90a -O3 -v "$tmp/late.ptx" -o "$tmp/x.cubin" > "$out/ptxas-gemm_wg-late.txt" 2>&1
git show 6d570e4:$k/gemm_ws.cu > $k/_ws_6d570e4.cu
trap 'rm -rf "$tmp" $k/_ws_6d570e4.cu' EXIT
for v in "v0:" "v1:-DWS_WAIT_ASM" "v2:-DWS_ARRIVE_ALL" "v3:-DWS_WAIT_ASM -DWS_ARRIVE_ALL"; do
	# shellcheck disable=SC2086
	cc $k/_ws_6d570e4.cu "$tmp/ws.ptx" ${v#*:}
	"$ptxas" -arch=sm_90a -O3 -v "$tmp/ws.ptx" -o "$tmp/x.cubin" > "$out/ptxas-ws-6d570e4-${v%%:*}.txt" 2>&1
done
# the k-tile loops' machine code: w256rp (gemm_wg) and w256r3 (gemm_ws),
# each loop from its barrier's branch target to the branch back
cuobjdump=$(dirname "$ptxas")/cuobjdump
for fam_fn in gemm_wg:gemm_dense_w256rp gemm_ws:gemm_dense_w256r3; do
	"$ptxas" -arch=sm_90a -O3 $k/${fam_fn%%:*}.ptx -o "$tmp/x.cubin"
	"$cuobjdump" -sass -fun ${fam_fn#*:} "$tmp/x.cubin" > "$out/sass-${fam_fn#*:}.txt"
	# the loop: the backward branch after the last HGMMA, to its target
	back=$(grep -E 'BRA 0x[0-9a-f]+ ;.*0xfffff' "$out/sass-${fam_fn#*:}.txt" | tail -1)
	from=$(echo "$back" | grep -oE 'BRA 0x[0-9a-f]+' | cut -c5-) to=$(echo "$back" | grep -oE '^\s*/\*[0-9a-f]+\*/' | tr -d ' /*')
	echo "${fam_fn#*:}: the k-tile loop $from to 0x$to, $(( (0x$to - from) / 16 + 1 )) instructions" >> "$out/loops.txt"
done
for f in "$out"/ptxas-*.txt; do echo "$(basename "$f"): C7513 notes $(grep -c C7513 "$f"), entries spilling $(grep 'spill stores' "$f" | grep -vc ' 0 bytes spill stores')"; done | tee "$out/summary.txt"
