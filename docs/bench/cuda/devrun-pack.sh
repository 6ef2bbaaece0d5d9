#!/bin/bash
# devrun-pack.sh: the binaries of a GPU call, built here and packed for its
# carry. Each NAME=COMMIT builds petal at COMMIT (-tags nofixture, without
# the embedded model: runs on the GPU machine name the checkout's model or
# bench synthetic weights) into DIR/petals.txz under NAME, all in one xz
# stream whose dictionary spans them, so that what the builds share (most
# of a Go binary) is stored once: four builds took 8.4 MB where one alone
# takes 6.9. TEST=COMMIT adds the engine/cuda test binary of COMMIT as
# DIR/cuda.test.xz (run-*.sh unpack both: lib.sh's unpack_devrun and
# `tar xJf petals.txz`). DIR/BUILT_FROM says what was built.
#
# Usage: [TEST=commit] devrun-pack.sh DIR NAME=COMMIT [NAME=COMMIT ...]
#   e.g. TEST=HEAD devrun-pack.sh devrun/ab petal=HEAD petal-main=main
set -eu
dir=$1
shift
root=$(git rev-parse --show-toplevel)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
: > "$dir/BUILT_FROM"
build() { # build NAME COMMIT CMD...: CMD run in a worktree of COMMIT
	local name=$1 commit=$2 wt
	shift 2
	wt=$(mktemp -d)
	git -C "$root" worktree add -q --detach "$wt" "$commit"
	(cd "$wt" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "$@")
	git -C "$root" worktree remove --force "$wt"
	echo "$name: $(git -C "$root" rev-parse --short "$commit")" >> "$dir/BUILT_FROM"
}
names=()
for spec in "$@"; do
	name=${spec%%=*} commit=${spec#*=}
	build "$name" "$commit" go build -tags nofixture -ldflags='-s -w' -o "$stage/$name" .
	names+=("$name")
done
(cd "$stage" && tar cf - "${names[@]}" | xz -9e -T1 --lzma2=preset=9e,dict=192MiB > "$dir/petals.txz")
if [ -n "${TEST:-}" ]; then
	build cuda.test "$TEST" go test -c -o "$stage/cuda.test" ./engine/cuda
	xz -9e -T0 -c "$stage/cuda.test" > "$dir/cuda.test.xz"
fi
echo "(petal builds -tags nofixture -ldflags='-s -w'; all CGO_ENABLED=0 GOOS=linux GOARCH=amd64)" >> "$dir/BUILT_FROM"
ls -l "$dir"
