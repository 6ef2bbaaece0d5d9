# From the repository root on the GPU machine (an H100), devrun/c3 carried
# (cuda.test.gz and petal.xz built at 2487ac1):
bash docs/bench/cuda/run-wg3.sh
# Its bench with --ablate wg128=w128o2,wg128=w256o was refused (one --ablate
# takes each key once: bench-ablate-refused.txt); on the same machine right
# after, the three settings one bench each:
D=devrun/c3; xz -dc $D/petal.xz > $D/petal && chmod +x $D/petal
for b in cuda cuda:wg128=w128o2 cuda:wg128=w256o; do f=$(echo $b | tr ':=' '_.')
  timeout 100 $D/petal bench --backend $b --synthetic qwen3.6-35b-a3b --max-context 20000 --prompt-lengths 512,1K,4K,16K \
    --context-lengths 256 --decode-tokens 8 --repeats 3 --out $OUT/bench-$f.json > $OUT/bench-$f.txt 2>&1
done
# (wg128, the option choosing the tile in m128's place, was removed after
# this run: DenseTile and MoETile now choose w256o / w128o2 / w64o.)
