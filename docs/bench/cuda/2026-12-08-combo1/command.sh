# an H100 (a fresh machine), 552bbc1: carry devrun/cb made as
# run-combo1.sh's header says (petal of 552bbc1, petal-vec of that
# commit with gdn_chunk.cu's GC_PREP_VEC at 1); the tree's logs,
# results, tokenizer test data and PTX but norm_comb.ptx and
# gdn_chunk_conv.ptx left out of the call. 169 s.
CARRY=devrun/cb bash docs/bench/cuda/run-combo1.sh
