#!/bin/bash
# Here: petal of main (34f1f62) and of the variants, main's and v3's test
# binaries, the variants' changed families' PTX, 9eee70f's cubins, the
# oracle's reference:
#   TEST=main bash docs/bench/cuda/devrun-pack.sh devrun/x4 petal=main petal-v1=exp/rn2b \
#     petal-v2=exp/gushared petal-v3=exp/all2 petal-v4=9eee70f
#   (cd a worktree of exp/all2 && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -o cuda-all2.test ./engine/cuda); xz it into devrun/x4
#   (for each variant vN and family F it changed: git show BRANCH:engine/cuda/kernels/F.ptx > F-vN.ptx; tar cJf devrun/x4/ptx.txz *.ptx)
#   git archive 9eee70f engine/cuda/kernels/sass | tar x --strip-components=4 -C devrun/x4/sass-old
#   tar cJf devrun/x4/ref.txz -C ../shared/oracle reference
#   git ls-files 'docs/bench/cuda/2026-*' 'bench/results' 'engine/**/*.ptx' | xargs rm -f   # the carry's room
# On the GPU machine (an H100 came), from the repository root, carry ["devrun/x4"]:
bash docs/bench/cuda/run-rnpre3.sh   # -> env.txt, logs.tgz (sass.tgz: the variants' cubins; v3's landed in 527ee10)
