#!/bin/bash
# run-dprep1.sh: the chunked delta rule's prep under GC_PREP_VEC=1 (its
# fragment-order writes a lane's fragment a 16- or 8-byte store over
# fixed trip counts, its q and k norms two tokens at a time; the same
# bits) against main, on its first run. The prep is 278 of the rule's 577
# µs at 4096 tokens (flowtrace1) and was issue-bound in ncu2 (54 % of
# issue slots, the integer pipe the busiest), the fragment positions
# worked out element by element a large part of its instructions. The
# variant's cubins of gdn_chunk, gdn_chunk_frag and gdn_chunk_flow
# (sass.tgz), the delta rule's tests on them (tests.txt: the same bits as
# delta=tf32, the flow form's as the default's, the float64 reference),
# TestMeasureDeltaForms of main and the variant (measure-*.txt), a kernel
# trace of a 4K prefill under each (ktrace-*.csv.gz: the prep's time
# printed), prefill rounds of both (bench-*). Carry devrun/pp, made as
#   V=$(bash docs/bench/cuda/variant-pack.sh devrun/pp vec gdn_chunk.cu:GC_PREP_VEC | tail -1)
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/pp petal=HEAD petal-vec=$V
# and the tree's logs, results, PTX and tokenizer test data left out of
# the call. About 4 minutes. Logs in $OUT: logs.tgz, sass.tgz, the traces.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/pp}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
variant_cubins $D vec $O
(cd /tmp && tar czf $O/sass.tgz s-vec/gdn_chunk*.cubin.gz s-vec/manifest.txt) && (cd $O && tar czf ptxas.tgz vec && rm -rf vec)
cuda_tests /tmp/s-vec $D/cuda-vec.test \
  'TestChunkedDeltaFragMatchesTF32|TestChunkedDeltaFlowMatchesFrag|TestChunkedDeltaRuleMatchesReference|TestDeltaChunkKernelMatchesLauncher' \
  $O/tests-vec.txt
for v in main vec; do
  if [ $v = main ]; then bin=$D/cuda.test sass=/tmp/s1; else bin=$D/cuda-vec.test sass=/tmp/s-vec; fi
  (cd engine/cuda && PETAL_CUDA_SASS=$sass PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 90 $bin -test.v \
    -test.run '^TestMeasureDeltaForms$' > $O/measure-$v.txt 2>&1)
  echo "TestMeasureDeltaForms $v: rc=$?"; grep -E 'gdn_chunk_prep_(frag|flow)' $O/measure-$v.txt | sed 's/^ *//' | cut -c1-130
done
echo "tests: $(( $(date +%s) - start )) s"
for run in petal:s1 petal-vec:s-vec; do
  b=${run%%:*}
  PETAL_CUDA_SASS=/tmp/${run#*:} OUT=$O PETAL=$D/$b TAG=$b BACKEND=cuda KT_PROMPTS=4K KT_CONTEXTS=256 LIMIT=60 \
    bash docs/bench/cuda/run-ktrace.sh 2>&1 | grep -E "bench rc"
  zcat $O/ktrace-$b.csv.gz | python3 -c "
import sys, statistics
d = [(int(l.split(',')[1]) - int(l.split(',')[0])) / 1e3 for l in sys.stdin if 'gdn_chunk_prep' in l]
print('$b: the prep µs, median of', len(d), statistics.median(d) if d else None)"
done
binary_rounds $D $O petal:s1 petal-vec:s-vec
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
