#!/bin/bash
# main at f5a2af2 (moe_layer behind moelayer=one)
bash docs/bench/cuda/run-moelayer.sh
