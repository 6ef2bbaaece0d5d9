#!/bin/bash
# run-pdl.sh: one GPU session for programmatic dependent launch (pdl=on),
# conv_silu in row blocks and the 32 × 32 plain GEMM (qgemm_s). Run from
# the repository root with RUN_DIR (default devrun/pdl) holding petal.xz,
# cuda.test.gz, driver.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64:
# go build -ldflags='-s -w' ., go test -c -ldflags='-s -w' ./engine/cuda
# and ./engine/cuda/driver) and ref.tgz (tar czf ref.tgz -C
# ../shared/oracle reference). The tests run in engine/cuda. Logs to $OUT:
#   steps.txt, tests.txt (driver, conformance with pdl on and off, the
#   plain GEMM tiles, the oracle), cli.txt (greedy with pdl on and off),
#   bench.txt and bench.json (decode at 1 and 4K, prefill at 512, 4K,
#   16K with pdl=on and --profile; the ablation pdl=off)
set -o pipefail
R=$(pwd)
D=${RUN_DIR:-$R/devrun/pdl}
O=${OUT:-/tmp/out}
mkdir -p "$O"
cd "$D" || exit 1
for f in cuda.test.gz; do [ -f $f ] && gunzip -f $f; done
[ -f petal.xz ] && xz -d -f petal.xz
chmod +x petal cuda.test
mkdir -p oracle && tar xzf ref.tgz -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
{ date -u; nvidia-smi; ./petal --version; } > "$O/env.txt" 2>&1
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
step() { # log, name, timeout, command...
	local log=$1 name=$2 t=$3
	shift 3
	local s=$(date +%s%N)
	echo "==== $name: $*" >> "$O/$log.txt"
	timeout "$t" "$@" >> "$O/$log.txt" 2>&1
	local rc=$?
	printf '%-22s rc=%-3s %7d ms\n' "$name" "$rc" $((($(date +%s%N) - s) / 1000000)) | tee -a "$O/steps.txt"
}
T=$D/cuda.test
P=$D/petal
[ -x "$D/driver.test" ] && step tests driver 60 "$D/driver.test" -test.v
cd "$R/engine/cuda"
step tests conformance 150 $T -test.v -test.run 'TestConformance|TestParseOptions|TestFusedMatchReferences|TestGraphOutlivesBackend|TestPlainGEMMTiles|TestConvRowsMatchKernel'
step tests prefill 120 $T -test.v -test.run 'TestTensorCoreOps|TestPrefill|TestChunkedDelta|TestFlashAttnInBackend'
step tests oracle 150 $T -test.v -test.run 'TestOracleOnGPU'
cd "$D"
grep -hE '^(--- |ok|FAIL|PASS)|panic' "$O/tests.txt" | grep -vE '^    --- PASS' | head -60
for v in pdl=on pdl=off; do
	step cli "greedy-$v" 30 sh -c "$P run --backend cuda:$v --raw --temperature 0 --max-tokens 48 'def fibonacci(n):' | tee 'greedy-$v.txt'"
done
cmp -s greedy-pdl=on.txt greedy-pdl=off.txt && echo "greedy: pdl=on and pdl=off give the same text" | tee -a "$O/cli.txt" || echo "greedy: pdl=on and pdl=off differ" | tee -a "$O/cli.txt"
step cli oracle-pdl 60 $P oracle --backend cuda:pdl=on --oracle "$D/oracle"
step bench bench 300 $P bench --backend cuda:pdl=on --synthetic qwen3.6-35b-a3b --max-context 16384 --decode-tokens 32 \
	--prompt-lengths 512,4K,16K --context-lengths 1,4K --profile \
	--ablate pdl=off --ablate-lengths 512,4K --out "$O/bench.json"
grep -vE '^(cuda: compiled|building)' "$O/bench.txt" | grep -vE '^ +[a-z_.]+ +[-0-9.]+ ' | head -40
[ "$(stat -c %s "$O/tests.txt")" -gt 200000 ] && gzip -9 "$O/tests.txt"
exit 0
