# From the repository root, devrun/pdls holding petal.xz (go build) and cuda.test.gz (go test -c ./engine/cuda):
D=$(pwd)/devrun/pdls; cd $D && xz -d -f petal.xz && gunzip -f cuda.test.gz && chmod +x petal cuda.test
(cd $D/../../engine/cuda && PETAL_CUDA_REQUIRE=1 timeout 100 $D/cuda.test -test.v -test.run 'TestConformance' > $OUT/tests.txt 2>&1)
for r in 1 2; do for spec in cuda cuda:pdl=some; do
	echo "==== $spec round $r" >> $OUT/bench.txt
	timeout 120 $D/petal bench --backend $spec --synthetic qwen3.6-35b-a3b --max-context 20000 --prompt-lengths 512 \
		--context-lengths 256,4K,16K --decode-tokens 64 --repeats 3 >> $OUT/bench.txt 2>&1
done; done
