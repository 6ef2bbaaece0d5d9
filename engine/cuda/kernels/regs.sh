#!/bin/sh
# regs.sh prints each entry point's registers and spills as ptxas sees them,
# and ptxas's notes on serialised wgmma (C75xx), for kernels whose machine
# code is not yet built, without a GPU: a quick check of a change (a spill,
# a register limit crossed, a wgmma pipeline broken) before a GPU run.
# It needs a ptxas; with no CUDA toolkit here, Debian's non-free
# nvidia-cuda-toolkit package serves, without installing it:
# - CUDA 12.4 (trixie's) reads the PTX as it is and builds sm_90a, the
#   wgmma families too. On bookworm: add "Suites: trixie" (Components:
#   non-free) to the apt sources, pinned low, apt-get update, then
#     apt-get download nvidia-cuda-toolkit=12.4.131~12.4.1-2 && dpkg -x nvidia-cuda-toolkit_*.deb /tmp/ctk12
#     PTXAS=/tmp/ctk12/usr/bin/ptxas sh engine/cuda/kernels/regs.sh gemm_ws gemm_fitw
#   Its counts differ from the GPU machine's 13.0 by a few registers (it
#   spills 8 bytes in gemm_group_w128rp and _w128r, 13.0 none).
# - CUDA 11.8 (bookworm's: "Components: main contrib non-free") builds
#   sm_90 only and reads PTX up to ISA 7.8, without the cluster barrier's
#   explicit .release/.acquire (the defaults of those instructions anyway),
#   so the copy it reads says .version 7.8 and drops them.
# Either is a guide (the GPU machine's ptxas builds the cubins), never a
# cubin.
#
# With CUOBJDUMP (the same package's cuobjdump) it also counts, for each
# entry point with wgmma, the wgmma instructions (HGMMA) and the waits for
# them (WARPGROUP.DEPBAR) in its machine code: ptxas notes serialised wgmma
# (C7513) only for some causes; a wait where the paths of a branch meet, or
# one it places early to reuse a wgmma's registers, shows only as a count
# of waits near the count of products (attn_prefill_wgo.cu's header).
#
# Usage: [PTXAS=path] [CUOBJDUMP=path] regs.sh FAMILY...
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ptxas=${PTXAS:-ptxas}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for fam in "$@"; do
	arch=$(sed -n 's/^\.target \([a-z0-9_]*\).*/\1/p' "$here/$fam.ptx" | head -1)
	if "$ptxas" --version | grep -q 'release 1[01]\.'; then
		arch=sm_90
		sed 's/^\.version 8\.0/.version 7.8/; s/barrier\.cluster\.arrive\.release/barrier.cluster.arrive/; s/barrier\.cluster\.wait\.acquire/barrier.cluster.wait/' \
			"$here/$fam.ptx" > "$tmp/$fam.ptx"
	else
		cp "$here/$fam.ptx" "$tmp/$fam.ptx"
	fi
	"$ptxas" -arch="$arch" -O3 -v "$tmp/$fam.ptx" -o "$tmp/$fam.cubin" 2>&1 |
		awk '/Compiling entry/ { name = $0; sub(/.*function .?/, "", name); sub(/.? for .*/, "", name) }
		     /spill stores/ { spill = $0; sub(/^.*info *: */, "", spill) }
		     /Used [0-9]+ registers/ { regs = $0; sub(/^.*Used /, "", regs); print name ": " regs "; " spill }
		     /error|C75[0-9][0-9]/ { print }'
	if [ -n "${CUOBJDUMP:-}" ] && [ -f "$tmp/$fam.cubin" ]; then
		"$CUOBJDUMP" -sass "$tmp/$fam.cubin" |
			awk '/Function :/ { if (name != "" && h > 0) print name ": " h " wgmma, " w " waits"; name = $3; h = 0; w = 0 }
			     /HGMMA/ { h++ }
			     /WARPGROUP.DEPBAR/ { w++ }
			     END { if (name != "" && h > 0) print name ": " h " wgmma, " w " waits" }'
	fi
done
