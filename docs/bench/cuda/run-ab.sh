#!/bin/bash
# run-ab.sh: a change checked and measured against the build before it, in
# two calls of the GPU machine (the binaries and the reference data do not
# fit one):
#   tests  devrun/rbt holds cuda.test.gz (CGO_ENABLED=0 GOOS=linux
#          GOARCH=amd64 go test -c -ldflags='-s -w' ./engine/cuda) and
#          ref.txz (tar cJf ref.txz -C ../shared/oracle reference): the
#          tests TESTS names (default: the read-back test, conformance, the
#          oracle, the snapshot round trip, the plain GEMMs' tiles, the
#          router);
#   bench  devrun/rbb holds petal-old.xz (the build before the change) and
#          petal.xz (with it): the same bench with each, prefill 512 / 4K,
#          decode 256 / 4K / 16K, 3 repeats (SPECS adds runs of the new
#          build, each petal:SPEC with its --backend spec); then every kernel of the new
#          build's prefill and decode traced (run-ktrace.sh), once per
#          --backend spec in KTRACE (default cuda).
# Usage, from the repository root: bash run-ab.sh tests|bench; logs to $OUT
# (bench.txt, bench-N.json a run, bench-TAG.txt and ktrace-TAG.csv.gz a
# trace: the GPU machine sends back 8 files at most, so keep SPECS plus
# twice KTRACE to 5 or fewer).
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"
case $1 in
tests)
	D=$R/devrun/rbt; cd "$D" && gunzip -f cuda.test.gz && chmod +x cuda.test
	mkdir -p oracle && tar xf ref.t*z -C oracle && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" oracle/tiny-qwen36-moe-4bit
	export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
	(cd "$R/engine/cuda" && timeout 300 "$D/cuda.test" -test.v -test.run "${TESTS:-TestRead|TestConformance|TestOracleOnGPU|TestSnapshotRoundTripOnGPU|TestGraphOutlivesBackend|TestPlainGEMMTiles|TestRouter|TestTensorCoreOps}" > "$O/tests.txt" 2>&1; echo "tests: rc=$?" | tee -a "$O/tests.txt")
	grep -E '^(--- FAIL|    --- FAIL|panic|ok|FAIL)' "$O/tests.txt" | head -20
	grep -E '^(--- |    --- )' "$O/tests.txt" | head -40
	;;
bench)
	D=$R/devrun/rbb; (cd "$D" && xz -d -f petal.xz petal-old.xz && chmod +x petal petal-old)
	# SPECS: more --backend specs to measure with the new build
	n=0
	for run in petal-old:cuda petal:cuda ${SPECS}; do
		p=${run%%:*}; spec=${run#*:}
		echo "==== $p --backend $spec" >> "$O/bench.txt"
		n=$((n + 1))  # each run's JSON report (its runs one by one) as bench-N.json
		timeout 150 "$D/$p" bench --out "$O/bench-$n.json" --backend $spec --synthetic qwen3.6-35b-a3b --max-context 20000 --prompt-lengths ${PROMPT_LENGTHS:-512,4K} \
			--context-lengths ${CONTEXT_LENGTHS:-256,4K,16K} --decode-tokens 64 --repeats 3 >> "$O/bench.txt" 2>&1
	done
	grep -E '^====|^ +[0-9K]+ ' "$O/bench.txt"
	# KTRACE: the --backend specs to trace (default cuda), each as ktrace-TAG
	for spec in ${KTRACE:-cuda}; do
		tag=$(echo "$spec" | tr -c 'a-z0-9\n' '_')
		PETAL=$D/petal TAG=$tag BACKEND=$spec bash "$R/docs/bench/cuda/run-ktrace.sh"
	done
	;;
*) echo "usage: run-ab.sh tests|bench" >&2; exit 2 ;;
esac
