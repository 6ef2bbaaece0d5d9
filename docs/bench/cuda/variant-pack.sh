#!/bin/bash
# variant-pack.sh: a build of petal with one of a kernel source's build
# switches set (gemm.cu's unless FILE: names another in
# engine/cuda/kernels), for a GPU call's carry beside HEAD's (run-fw2.sh's
# petal-late): a worktree of COMMIT with `#define SWITCH N` turned to VALUE
# (1 unless given as SWITCH=VALUE) and its PTX
# regenerated (clang-19), committed there (not on any branch; the commit's
# name goes into DIR/BUILT_FROM.NAME, which devrun-pack.sh leaves), then
#   DIR/ptx-NAME.txz       the PTX of every family the switch changed, as
#                          ptx-NAME/*.ptx (lib.sh's variant_cubins makes
#                          their cubins)
#   DIR/cuda-NAME.test.xz  its engine/cuda test binary
# and prints the commit, for devrun-pack.sh's petal-NAME=COMMIT.
#
# Usage: variant-pack.sh DIR NAME [FILE:]SWITCH[=VALUE] [COMMIT]
#   e.g. variant-pack.sh devrun/fw late GEMM_RA_LATE_LOAD=4
#        variant-pack.sh devrun/pp vec gdn_chunk.cu:GC_PREP_VEC
#   then TEST=HEAD devrun-pack.sh devrun/fw petal=HEAD petal-late=<printed commit>

set -eu
dir=$1 name=$2 spec=$3 value=1 commit=${4:-HEAD} file=gemm.cu
case $spec in *:*) file=${spec%%:*} spec=${spec#*:} ;; esac
switch=${spec%%=*}
case $spec in *=*) value=${spec#*=} ;; esac
root=$(git rev-parse --show-toplevel)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
wt=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$wt" 2>/dev/null || true' EXIT
git -C "$root" worktree add -q --detach "$wt" "$commit"
cd "$wt"
grep -q "^#define $switch [0-9]*$" "engine/cuda/kernels/$file" || { echo "variant-pack.sh: no '#define $switch N' in $file" >&2; exit 1; }
sed -i "s/^#define $switch [0-9]*\$/#define $switch $value/" "engine/cuda/kernels/$file"
sh engine/cuda/kernels/gen.sh
git -c user.name=petal -c user.email=petal@localhost commit -qam "variant: $switch=$value (a measurement build, not for main)"
variant=$(git rev-parse --short HEAD)
mkdir -p "ptx-$name" && git diff --name-only HEAD~1 -- 'engine/cuda/kernels/*.ptx' | xargs -r cp -t "ptx-$name/"
[ -n "$(ls "ptx-$name")" ] || { echo "variant-pack.sh: $switch=$value changed no PTX" >&2; exit 1; }
tar cJf "$dir/ptx-$name.txz" "ptx-$name"
CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -o "$wt/cuda-$name.test" ./engine/cuda
xz -9e -T0 -c "$wt/cuda-$name.test" > "$dir/cuda-$name.test.xz"
echo "cuda-$name.test, ptx-$name.txz: $variant ($switch=$value on $(git -C "$root" rev-parse --short "$commit"))" > "$dir/BUILT_FROM.$name"
echo "$variant"
