#!/bin/bash
# run-verify.sh: one GPU session that checks the CUDA backend with its
# defaults (flash attention and the chunked delta rule for prefill) and
# measures them against the plain kernels. Run from the repository root
# with RUN_DIR (default devrun/verify) holding petal.gz and cuda.test.gz
# (built here with CGO_ENABLED=0 GOOS=linux GOARCH=amd64: go build
# -ldflags='-s -w' . and go test -c -ldflags='-s -w' ./engine/cuda) and
# ref.tgz (tar czf ref.tgz -C ../shared/oracle reference). The tests run
# in engine/cuda, where they find the kernel sources. Logs go to $OUT:
#   env.txt    the machine
#   steps.txt  each part's exit status and time
#   tests.txt  conformance, the decode kernels, flash attention, the
#              chunked delta rule, the oracle test (gzipped if large)
#   cli.txt    petal oracle, petal doctor, --device, the fit check, greedy
#   bench.txt  petal bench at 512, 4K and 16K with the defaults (--profile)
#              and with attn=plain and delta=sequential as ablations
#   bench.json
# A failing part does not stop the later ones; each has a timeout.
set -o pipefail
R=$(pwd)
D=${RUN_DIR:-$R/devrun/verify}
O=${OUT:-/tmp/out}
mkdir -p "$O"
cd "$D" || exit 1
for f in petal.gz cuda.test.gz; do [ -f $f ] && gunzip -f $f; done
[ -f petal.xz ] && xz -d -f petal.xz
chmod +x petal cuda.test
mkdir -p oracle && tar xzf ref.tgz -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
{ date -u; nvidia-smi; nproc; free -g; ./petal --version; } > "$O/env.txt" 2>&1
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
cd "$R/engine/cuda"
step tests conformance 120 $T -test.v -test.run 'TestConformance|TestParseOptions|TestFusedMatchReferences|TestGraphOutlivesBackend'
step tests flash 120 $T -test.v -test.run 'TestParseAttnOption|TestFlashShapeCheck|TestFlashAttnMatchesReference|TestFlashAttnInBackend'
step tests chunked 120 $T -test.v -test.run 'TestDelta|TestChunkedDelta'
step tests tensor-cores 120 $T -test.v -test.run 'TestTensorCoreOps|TestPrefill'
step tests oracle 150 $T -test.v -test.run 'TestOracleOnGPU'
cd "$D"
grep -hE '^(--- |ok|FAIL|PASS)|panic' "$O/tests.txt" | grep -vE '^    --- PASS' | head -60
step cli oracle-defaults 60 $P oracle --backend cuda --oracle "$D/oracle"
step cli oracle-bf16kv 60 $P oracle --backend cuda:kv=bf16 --oracle "$D/oracle"
step cli doctor 120 $P doctor --oracle "$D/oracle"
step cli device-1 30 $P run --backend cuda:device=1 --max-tokens 4 "Hi"
step cli device-flag 30 $P run --device 0 --max-tokens 4 "Hi"
step cli inspect 30 $P inspect --device 0 --context 131072 --kv bf16
for v in "" ":attn=plain,delta=sequential"; do
	step cli "greedy$v" 30 sh -c "$P run --backend cuda$v --raw --temperature 0 --max-tokens 48 'def fibonacci(n):' | tee 'greedy$v.txt'"
done
if [ -s greedy.txt ] && cmp -s greedy.txt "greedy:attn=plain,delta=sequential.txt"; then
	echo "greedy: the defaults and attn=plain,delta=sequential give the same text" | tee -a "$O/cli.txt"
else
	echo "greedy: the defaults and attn=plain,delta=sequential differ (or one failed)" | tee -a "$O/cli.txt"
fi
# the fit check: a context that cannot fit in device memory is refused before loading
step cli fit 60 $P bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 100000000 --lengths 256
step bench bench 300 $P bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 16384 --decode-tokens 16 \
	--prompt-lengths 512,4K,16K --context-lengths 1,4K --profile \
	--ablate attn=plain,delta=sequential --ablate-lengths 512,4K,16K --out "$O/bench.json"
grep -vE '^(cuda: compiled|building)' "$O/bench.txt" | grep -vE '^ +[a-z_.]+ +[-0-9.]+ ' | head -60
[ "$(stat -c %s "$O/tests.txt")" -gt 200000 ] && gzip -9 "$O/tests.txt"
exit 0
