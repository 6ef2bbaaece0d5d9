#!/bin/bash
# main at bd0bc1c (l2ahead=on built, off by default), devrun/la as the script's header says; an H100; 51 s.
bash docs/bench/cuda/run-l2ahead.sh
# benches.tgz unpacked here.
