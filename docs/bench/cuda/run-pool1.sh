#!/bin/bash
# run-pool1.sh: pool=on (the state's buffers, the caches' shadows and the
# scratch from the device's memory pool in stream order, 2 GiB mapped
# once the weights are in) on its first run. Tests on the built-in cubins
# (tests.txt): conformance under every variant (pool=off among them),
# TestPoolReusesFreedMemory, TestGraphOnlyShortChunks,
# TestGraphOutlivesBackend, TestSnapshotRoundTripOnGPU, the chunked delta
# rule's and the MoE's tests; the oracle under the defaults and pool=off
# (oracle.txt); then four runs a length of prompts of 16 to 4K tokens under
# the defaults and pool=off, two rounds, each run's time and Prepare
# printed. From the repository root; $CARRY (default devrun/po) holds
# petals.txz (petal, -tags nofixture), cuda.test.xz and ref.txz. About 3
# minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/po}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
start=$(date +%s)
(cd engine/cuda && PETAL_CUDA_REQUIRE=1 timeout 200 $D/cuda.test -test.v -test.run \
  'TestConformance|TestPool|TestGraphOnlyShortChunks|TestGraphOutlivesBackend|TestSnapshotRoundTripOnGPU|TestChunkedDeltaRuleMatchesReference|TestMoEGroupedMatchesReference|TestTensorCoreOpsMatchReferences' > $O/tests.txt 2>&1)
echo "tests: rc=$?"; grep -E '^(--- FAIL|FAIL|ok|PASS)|panic' $O/tests.txt | head -12
echo "top-level: $(grep -c '^--- PASS' $O/tests.txt) passed, $(grep -c '^--- FAIL' $O/tests.txt) failed"
(cd engine/cuda && PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 100 $D/cuda.test -test.v \
  -test.run 'TestOracleOnGPU/(defaults|pool=off)$' > $O/oracle.txt 2>&1)
echo "oracle: rc=$?"; grep -E '^ *--- |panic' $O/oracle.txt | head -4; grep -E 'top-1' $O/oracle.txt | cut -c1-200 | head -10
echo "tests: $(( $(date +%s) - start )) s"
runs() { python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
for r in d['results']:
    if 'prefill' in r: print('   ', r['length'], 'runs ms', [round(x*1e3,2) for x in r['prefill']['runs_seconds']], 'prepare ms', [round(x*1e3,2) for x in r['prefill']['compile_runs_seconds']], 'GiB', round(r['prefill']['device_bytes']/2**30,2))
" "$1"; }
for round in 1 2; do
  for be in cuda cuda:pool=off; do
    tag=$round-$(tag_of $be)
    BENCH_LIMIT=80 bench_run $D/petal $O "$tag" $be --max-context 5000 --prompt-lengths 16,64,256,512,1K,4K \
      --context-lengths 256,4K --decode-tokens 16 --repeats 4 --floors=false > /dev/null
    echo "$be ($tag):"; runs $O/bench-$tag.json; grep -E '^ +(256|4K) ' $O/bench-$tag.txt | awk '{print "    decode at "$1": "$(NF-1)" tok/s"}'
  done
done
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
