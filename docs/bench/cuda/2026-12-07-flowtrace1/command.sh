# an H100 (a fresh machine), carry devrun/qk (petal of 21eba24, which has
# deltaflow; gdn_chunk_flow compiled from its PTX at load); the tree's
# logs, results, tokenizer test data and PTX left out of the call
bash docs/bench/cuda/run-flowtrace1.sh
