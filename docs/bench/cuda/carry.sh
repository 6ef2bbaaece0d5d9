#!/bin/bash
# carry.sh: a GPU call's carry and the work tree's size for it, from the
# repository root (a call takes 64 MiB in all: the tracked tree is about
# 51 MB, of it 30 MB of logs, results, tokenizer test data and PTX that the
# runs here do not read but for the families they build cubins of).
#
#   carry.sh pf        devrun/pf for run-pairflow1.sh (petal and petal-ahead,
#                      the variant GC_FLOW_AHEAD=1, the test binaries, the
#                      oracle's reference)
#   carry.sh ct        devrun/ct for run-cert1.sh (petal and petal-codes, the
#                      variant GEMM_RA_CODES_L2=1, the test binaries, the
#                      oracle's reference)
#   carry.sh trim FAMILY...
#                      those files out of the work tree, but the PTX of the
#                      families named (whose cubins the call makes)
#   carry.sh restore   them back; commit nothing between trim and restore
set -eu
here=docs/bench/cuda
case ${1:-} in
pf)
	rm -rf devrun/pf
	V=$(bash $here/variant-pack.sh devrun/pf ahead gdn_chunk.cu:GC_FLOW_AHEAD | tail -1)
	TEST=HEAD bash $here/devrun-pack.sh devrun/pf petal=HEAD petal-ahead="$V"
	tar cJf devrun/pf/ref.txz -C ../shared/oracle reference
	du -sh devrun/pf
	;;
ct)
	rm -rf devrun/ct
	V=$(bash $here/variant-pack.sh devrun/ct codes GEMM_RA_CODES_L2 | tail -1)
	TEST=HEAD bash $here/devrun-pack.sh devrun/ct petal=HEAD petal-codes="$V"
	tar cJf devrun/ct/ref.txz -C ../shared/oracle reference
	du -sh devrun/ct
	;;
trim)
	shift
	keep=$(printf '%s.ptx\n' "$@")
	git ls-files 'docs/bench/cuda/2026-*' 'bench/results' 'engine/**/*.ptx' 'engine/tokenizer/testdata' |
		grep -v -x -F -f <(printf 'engine/cuda/kernels/%s\n' $keep) | xargs rm -f
	echo "trimmed: $(git ls-files -d | wc -l) files out; carry.sh restore before any commit"
	;;
restore)
	git ls-files -d -z | xargs -0 -r git checkout --
	echo "restored; $(git status --short | wc -l) changes in the tree"
	;;
*)
	sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
	exit 2
	;;
esac
