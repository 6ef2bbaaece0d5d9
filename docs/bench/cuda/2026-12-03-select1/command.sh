#!/bin/bash
# petal-old: 789495d; petal-s: 6d9c3da (the router's candidate selection); petal-l: 51e56ab
# (the packed integer layout); petal: 2c2b8c5 (the prefetch two steps ahead, since reverted).
KTRACE=none RUNS="petal-old:cuda petal-s:cuda petal-l:cuda petal:cuda" bash docs/bench/cuda/run-qstage.sh
