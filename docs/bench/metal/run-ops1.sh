#!/bin/bash
# run-ops1.sh: one GPU session that runs the Metal kernels' own source on an
# NVIDIA H200, each family's tests in its own process (a CUDA fault spoils
# only its own context), then checks that every entry point of every
# family was launched by one of them. The test binary of
# engine/metal/cudarun, cross-built with
#   CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -ldflags='-s -w' \
#     -o devrun/metal/cudarun.test ./engine/metal/cudarun
# Usage, from the repository root: OUT=logs bash run-ops1.sh [test binary]
set -o pipefail
BIN=${1:-devrun/metal/cudarun.test}
OUT=${OUT:-.}
LAUNCHED="$OUT/launched.txt"
[ -n "$KEEP_LAUNCHED" ] || : >"$LAUNCHED" # KEEP_LAUNCHED: add to what engine/metal's tests recorded
families=(
	"entries:^TestEntriesFound$"
	"qmv:^TestQMVMatchesReference$"
	"route:^TestRouteMatchesReference$"
	"gdn:^TestGDNMatchesReference$"
	"attn:^(TestAttnMatchesReference|TestQKPrepLongPositions)$"
	"moe:^TestMoEMatchesReference$"
	"ops:^(TestEmbedRows|TestAddRMSNorm|TestQGEMM|TestConvSiLU|TestDeltaRule|TestGatedRMSNorm|TestQKPrepRows|TestAttnRows|TestRouteSelectRows|TestExperts|TestAdvance|TestConvert)$"
	"sample:^(TestSampleRow|TestLogprobsRow)$"
	# gemm.metal came after runs 1-3 of 2026-12-01-ops1
	"gemm:^(TestSimdgroupMatrixProduct|TestGEMMDenseMatchesReference|TestGEMMExpertsMatchReference)$"
	# gemm_tensor.metal (Metal 4's matmul2d, emulated) came after backend3
	"gemm_tensor:^(TestGEMMTensorDenseMatchesReference|TestGEMMTensorExpertsMatchReference)$"
)
{
	date -u
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
	sha256sum "$BIN"
	for f in "${families[@]}"; do
		echo "PETAL_CUDA_REQUIRE=1 PETAL_CUDARUN_LAUNCHED=$LAUNCHED timeout 100 $BIN -test.v -test.run '${f#*:}' -test.timeout 95s > ${f%%:*}.log"
	done
	echo "PETAL_CUDARUN_CHECK_LAUNCHED=$LAUNCHED $BIN -test.v -test.run '^TestEntriesLaunchedAcrossRuns$' > entries-launched.log"
} 2>&1 | tee "$OUT/env.log"
status=0
for f in "${families[@]}"; do
	name=${f%%:*}
	PETAL_CUDA_REQUIRE=1 PETAL_CUDARUN_LAUNCHED="$LAUNCHED" timeout 100 "$BIN" -test.v -test.run "${f#*:}" -test.timeout 95s >"$OUT/$name.log" 2>&1
	rc=$?
	echo "exit status $rc" >>"$OUT/$name.log"
	echo "$name: exit status $rc"
	[ $rc -eq 0 ] || status=1
done
PETAL_CUDARUN_CHECK_LAUNCHED="$LAUNCHED" "$BIN" -test.v -test.run '^TestEntriesLaunchedAcrossRuns$' >"$OUT/entries-launched.log" 2>&1 || status=1
tail -n 12 "$OUT/entries-launched.log"
exit $status
