# an H100, right after stout1 on the same machine, the same carry (devrun/so) and tree
bash docs/bench/cuda/run-stout2.sh
