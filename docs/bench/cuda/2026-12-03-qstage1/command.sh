#!/bin/bash
# petal-old: 0df24bc; petal: the qstage load fix (committed as 789495d).
bash docs/bench/cuda/run-qstage.sh
