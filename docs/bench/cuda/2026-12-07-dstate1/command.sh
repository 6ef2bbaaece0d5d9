# an H100, right after next26 on the same machine, carry devrun/ep as
# next26's; the tree's gdn_chunk_w16.ptx and gdn_chunk_flow.ptx put back
# into the call's trimmed tree
ROUNDS=2 bash docs/bench/cuda/run-dstate1.sh
