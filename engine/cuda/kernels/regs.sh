#!/bin/sh
# regs.sh prints each entry point's registers and spills as ptxas sees them,
# for kernels whose machine code is not yet built, without a GPU: a quick
# check of a change (a spill, a register limit crossed) before a GPU run.
# It needs a ptxas; with no CUDA toolkit here, CUDA 11.8's from Debian's
# non-free nvidia-cuda-toolkit package serves, without installing it (the
# apt sources need the non-free component: "Components: main contrib
# non-free" in /etc/apt/sources.list.d/debian.sources, then apt-get update):
#   apt-get download nvidia-cuda-toolkit && dpkg -x nvidia-cuda-toolkit_*.deb /tmp/ctk
#   PTXAS=/tmp/ctk/usr/bin/ptxas sh engine/cuda/kernels/regs.sh gdn_cl route_cl
# 11.8 reads PTX up to ISA 7.8 and not the cluster barrier's explicit
# .release/.acquire (the defaults of those instructions anyway), so the
# copy it reads says .version 7.8 and drops them: its counts are a guide
# (the GPU machine's ptxas, 13.0, builds the cubins), never a cubin.
#
# Usage: [PTXAS=path] regs.sh FAMILY...
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ptxas=${PTXAS:-ptxas}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for fam in "$@"; do
	sed 's/^\.version 8\.0/.version 7.8/; s/barrier\.cluster\.arrive\.release/barrier.cluster.arrive/; s/barrier\.cluster\.wait\.acquire/barrier.cluster.wait/' \
		"$here/$fam.ptx" > "$tmp/$fam.ptx"
	"$ptxas" -arch=sm_90 -O3 -v "$tmp/$fam.ptx" -o "$tmp/$fam.cubin" 2>&1 |
		awk '/Compiling entry/ { name = $0; sub(/.*function .?/, "", name); sub(/.? for .*/, "", name) }
		     /spill stores/ { spill = $0; sub(/^.*info *: */, "", spill) }
		     /Used [0-9]+ registers/ { regs = $0; sub(/^.*Used /, "", regs); print name ": " regs "; " spill }
		     /error/ { print }'
done
