# lib.sh: what the run-*.sh scripts here share (sourced, from the
# repository root). The scripts before it, each a record of a run that was
# made, keep their own copies of these lines.

# unpack_devrun DIR: DIR's cuda.test.gz or cuda.test.xz and petal.xz (where
# there) unpacked in place, runnable.
unpack_devrun() {
	(cd "$1" && if [ -f cuda.test.gz ]; then gunzip -f cuda.test.gz && chmod +x cuda.test; fi &&
		if [ -f cuda.test.xz ]; then xz -dc cuda.test.xz > cuda.test && chmod +x cuda.test; fi &&
		if [ -f petal.xz ]; then xz -dc petal.xz > petal && chmod +x petal; fi)
}

# unpack_oracle DIR R: DIR's test binary unpacked (unpack_devrun) and
# DIR/oracle made from DIR/ref.txz (tar cJf ref.txz -C ../shared/oracle
# reference) with the checkout R's tiny model beside it, for
# PETAL_TEST_ORACLE=DIR/oracle.
unpack_oracle() {
	unpack_devrun "$1" && mkdir -p "$1/oracle" && tar xf "$1/ref.txz" -C "$1/oracle" &&
		ln -sfn "$2/fixtures/tiny-qwen36-moe-4bit" "$1/oracle/tiny-qwen36-moe-4bit"
}

# gpu_env FILE: the date and the GPU (name, driver, clocks) into FILE.
gpu_env() {
	{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv; } > "$1" 2>&1
}

# call_setup DIR R OUT LOGS SASS: a call's start: DIR's builds and the
# oracle unpacked (unpack_oracle, petals.txz), the GPU into OUT/env.txt,
# LOGS a fresh folder and SASS a fresh copy of the tree's cubins.
call_setup() {
	unpack_oracle "$1" "$2" && (cd "$1" && tar xJf petals.txz)
	gpu_env "$3/env.txt"
	rm -rf "$4" "$5" && mkdir -p "$4" && cp -r engine/cuda/kernels/sass "$5"
}

# el ARGS...: ARGS stamped with the seconds since $start.
el() { echo "[$(($(date +%s) - ${start:-0})) s] $*"; }

# bench_run PETAL DIR TAG BACKEND ARGS...: petal bench --synthetic
# qwen3.6-35b-a3b under --backend BACKEND with ARGS, its table and JSON to
# DIR/bench-TAG.txt and .json (BENCH_LIMIT seconds, default 100), the rows
# shown.
bench_run() {
	local petal=$1 dir=$2 tag=$3 be=$4
	shift 4
	timeout "${BENCH_LIMIT:-100}" "$petal" bench --backend "$be" --synthetic qwen3.6-35b-a3b "$@" \
		--out "$dir/bench-$tag.json" > "$dir/bench-$tag.txt" 2>&1
	echo "$be ($tag): rc=$?"
	grep -E '^ +[0-9]+K? ' "$dir/bench-$tag.txt"
}

# tag_of BACKEND: a file name's part for a --backend spec.
tag_of() { echo "$1" | tr ':=,' '_._'; }

# peer_repeats DIR OUT: the C++/CUDA engine's lengths (512 / 4K / 16K
# prefill, decode at 256 / 4K / 16K), three runs a length, for DIR/petal and
# DIR/petal-old in two alternating rounds, tarred as OUT/repeats.tgz.
peer_repeats() {
	local dir=$1 out=$2 round b
	mkdir -p /tmp/rp
	for round in 1 2; do
		for b in petal petal-old; do
			bench_run "$dir/$b" /tmp/rp "repeats-$round-$b" cuda --max-context 20000 --prompt-lengths 512,4K,16K \
				--context-lengths 256,4K,16K --decode-tokens 64 --repeats 3
		done
	done
	tar czf "$out/repeats.tgz" -C /tmp/rp .
}

# sass_cubins OUT: kernels/sass.sh with the toolkit's ptxas, every family's
# cubin to OUT/sass, tarred as OUT/sass.tgz, its log OUT/sass.txt.
sass_cubins() {
	local out=$1
	PATH=$PATH:/usr/local/cuda/bin sh engine/cuda/kernels/sass.sh "$out/sass" > "$out/sass.txt" 2>&1
	echo "sass.sh: rc=$?"
	(cd "$out" && tar czf sass.tgz sass && rm -rf sass)
}

# pack_out DIR: every file under DIR but env.txt and the .tgz files tarred
# into DIR/logs.tgz and removed, for a run that writes more files than the
# eight a call brings back (2026-12-06-deltacl1 lost its tests' logs so).
pack_out() {
	local dir=$1
	(cd "$dir" && find . -maxdepth 1 -type f ! -name env.txt ! -name '*.tgz' -printf '%f\n' > /tmp/pack.list &&
		[ -s /tmp/pack.list ] && tar czf logs.tgz -T /tmp/pack.list && xargs rm -f < /tmp/pack.list)
}

# cubin_into DIR FAMILY PTX: DIR (a copy of engine/cuda/kernels/sass) gets
# FAMILY's cubin made from PTX by ptxas, and its manifest line that PTX's
# sha256, so that PETAL_CUDA_SASS=DIR serves a build whose FAMILY is PTX.
cubin_into() {
	/usr/local/cuda/bin/ptxas -arch=sm_90 -O3 "$3" -o "$1/$2.sm_90.cubin" && gzip -9 -n -f "$1/$2.sm_90.cubin" &&
		sed -i "s/^$2 sm_90 [0-9a-f]* /$2 sm_90 $(sha256sum "$3" | cut -d' ' -f1) /" "$1/manifest.txt"
}

# new_cubin DIR FAMILY OUT [PTX]: DIR (a copy of engine/cuda/kernels/sass)
# gets the cubin of FAMILY made by ptxas from PTX (default
# engine/cuda/kernels/FAMILY.ptx) for its PTX's target (its -v report in
# OUT/ptxas-FAMILY.txt), in place of any FAMILY had there, and a manifest
# line with that PTX's sha256 and ptxas's version; the registers, spills
# and notes of serialised wgmma (C75xx) printed.
new_cubin() {
	local dir=$1 fam=$2 out=$3 ptx=${4:-engine/cuda/kernels/$2.ptx} tgt
	tgt=$(sed -n 's/^\.target \([a-z0-9_]*\).*/\1/p' "$ptx" | head -1) # sm_90, or sm_90a for wgmma
	sed -i "/^$fam /d" "$dir/manifest.txt" && rm -f "$dir/$fam".*.cubin.gz
	/usr/local/cuda/bin/ptxas -arch=$tgt -O3 -v "$ptx" -o "$dir/$fam.$tgt.cubin" > "$out/ptxas-$fam.txt" 2>&1 &&
		gzip -9 -n -f "$dir/$fam.$tgt.cubin" &&
		echo "$fam $tgt $(sha256sum "$ptx" | cut -d' ' -f1) $(/usr/local/cuda/bin/ptxas --version | grep -oE 'V[0-9.]+' | head -1)" >> "$dir/manifest.txt"
	echo "$fam cubin: rc=$?; C75xx notes $(grep -c 'C75[0-9][0-9]' "$out/ptxas-$fam.txt"); $(grep -E 'registers|spill' "$out/ptxas-$fam.txt" | tr '\n' ' ' | cut -c1-300)"
}

# cuda_tests SASS TESTBIN REGEX OUT: TESTBIN's tests matching REGEX on the
# cubins of SASS ('': the binary's built-in ones), from engine/cuda, the log
# in OUT, a summary printed.
cuda_tests() {
	(cd engine/cuda && PETAL_CUDA_SASS=$1 PETAL_CUDA_REQUIRE=1 timeout 150 "$2" -test.v -test.run "$3" > "$4" 2>&1)
	echo "tests: rc=$?"; grep -E '^(--- FAIL|FAIL|ok|PASS)|panic' "$4" | head -12
	echo "top-level: $(grep -c '^--- PASS' "$4") passed, $(grep -c '^--- FAIL' "$4") failed"
}

# oracle_specs DIR SPECS OUT: TestOracleOnGPU under SPECS (a regexp of
# its specs, e.g. 'defaults|moefit=on') with DIR's test binary and oracle
# (unpack_oracle), the log in OUT, the figures printed.
oracle_specs() {
	(cd engine/cuda && PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE="$1/oracle" timeout 100 "$1/cuda.test" -test.v \
		-test.run "TestOracleOnGPU/($2)\$" > "$3" 2>&1)
	echo "oracle: rc=$?"; grep -E '^ *--- |panic' "$3" | head -12; grep -E 'top-1' "$3" | cut -c1-200 | head -15
}

# variant_rounds DIR OUT N: DIR/petal (its own cubins) and DIR/petal-v1 ..
# petal-vN (on /tmp/s1 .. /tmp/sN) in ROUNDS (default 2) alternating
# rounds: prefill of 512 tokens, decode at 4K and 32K, 64 tokens.
variant_rounds() {
	local dir=$1 out=$2 n=$3 round v
	for round in $(seq 1 "${ROUNDS:-2}"); do
		BENCH_LIMIT=50 bench_run "$dir/petal" "$out" "$round-main" cuda --max-context 40000 --prompt-lengths 512 \
			--context-lengths 4K,32K --decode-tokens 64 --floors=false
		for v in $(seq 1 "$n"); do
			PETAL_CUDA_SASS=/tmp/s$v BENCH_LIMIT=50 bench_run "$dir/petal-v$v" "$out" "$round-v$v" cuda --max-context 40000 \
				--prompt-lengths 512 --context-lengths 4K,32K --decode-tokens 64 --floors=false
		done
	done
}

# prefill_rounds PETAL OUT BACKEND...: prefill of 512 / 4K / 16K tokens,
# three runs a length (decode 4 tokens at 256), under each BACKEND in
# turn, in ROUNDS (default 2) alternating rounds; PETAL_CUDA_SASS as the
# caller set it (e.g. /tmp/s1, a family's new cubin beside the built-in ones).
prefill_rounds() {
	local petal=$1 out=$2 round be
	shift 2
	for round in $(seq 1 "${ROUNDS:-2}"); do
		for be in "$@"; do
			BENCH_LIMIT=60 bench_run "$petal" "$out" "$round-$(tag_of "$be")" "$be" --max-context 17000 \
				--prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
		done
	done
}

# config_rounds CARRY OUT TGZ BUILD:SASS:BACKEND...: prefill of 4K and
# 16K tokens (two repeats; decode 4 tokens at 256) of each build
# CARRY/BUILD under BACKEND on the cubins of /tmp/SASS, in ROUNDS (default
# 2) alternating rounds; OUT packed into TGZ again after each run, so that
# a call cut short brings back what it ran.
config_rounds() {
	local dir=$1 out=$2 tgz=$3 round cfg b rest s be
	shift 3
	for round in $(seq 1 "${ROUNDS:-2}"); do
		for cfg in "$@"; do
			b=${cfg%%:*} rest=${cfg#*:}
			s=${rest%%:*} be=${rest#*:}
			PETAL_CUDA_SASS=/tmp/$s BENCH_LIMIT=45 bench_run "$dir/$b" "$out" "$round-$b-$(tag_of "$be")" "$be" --max-context 17000 \
				--prompt-lengths 4K,16K --context-lengths 256 --decode-tokens 4 --repeats 2 --floors=false
			tar czf "$(dirname "$tgz")/.$(basename "$tgz")" -C "$(dirname "$out")" "$(basename "$out")" &&
				mv "$(dirname "$tgz")/.$(basename "$tgz")" "$tgz"
		done
		echo "round $round: $(($(date +%s) - ${start:-0})) s"
	done
}

# binary_rounds CARRY OUT NAME:SASS...: prefill_rounds' lengths for each
# build CARRY/NAME on the cubins of /tmp/SASS, in ROUNDS (default 2)
# alternating rounds: a variant's build (variant-pack.sh) against main's.
binary_rounds() {
	local dir=$1 out=$2 round run b s
	shift 2
	for round in $(seq 1 "${ROUNDS:-2}"); do
		for run in "$@"; do
			b=${run%%:*} s=${run#*:}
			PETAL_CUDA_SASS=/tmp/$s BENCH_LIMIT=60 bench_run "$dir/$b" "$out" "$round-$b" cuda --max-context 17000 \
				--prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
		done
	done
}

# routenorm=cluster was removed after fw4; this stays for run-fw4.sh, that run's command.
# routenorm_rounds SASS PETAL OUT ROUNDS: decode at 4K and 32K (and prefill
# of 512 tokens) under routenorm=ticket (the default) and routenorm=cluster,
# same binary, in ROUNDS alternating rounds, on the cubins of SASS.
routenorm_rounds() {
	local sass=$1 petal=$2 out=$3 round be
	for round in $(seq 1 "$4"); do
		for be in cuda cuda:routenorm=cluster; do
			PETAL_CUDA_SASS=$sass BENCH_LIMIT=50 bench_run "$petal" "$out" "rcl-$round-$(tag_of $be)" $be --max-context 40000 \
				--prompt-lengths 512 --context-lengths 4K,32K --decode-tokens 64 --floors=false
		done
	done
}

# variant_cubins CARRY NAME OUT: /tmp/s-NAME, a copy of /tmp/s1 (the tree's
# cubins) with each family whose PTX in CARRY/ptx-NAME.txz (variant-pack.sh)
# differs from the tree's remade from it (ptxas logs in OUT/NAME), and
# CARRY/cuda-NAME.test unpacked where the carry has it.
variant_cubins() {
	local d=$1 v=$2 out=$3 p fam
	(cd "$d" && tar xJf "ptx-$v.txz") && mkdir -p "$out/$v" && rm -rf "/tmp/s-$v" && cp -r /tmp/s1 "/tmp/s-$v"
	for p in "$d/ptx-$v"/*.ptx; do
		fam=$(basename "$p" .ptx)
		cmp -s "$p" "engine/cuda/kernels/$fam.ptx" || new_cubin "/tmp/s-$v" "$fam" "$out/$v" "$p"
	done
	if [ -f "$d/cuda-$v.test.xz" ]; then xz -dc "$d/cuda-$v.test.xz" > "$d/cuda-$v.test" && chmod +x "$d/cuda-$v.test"; fi
}
