#!/bin/bash
# run-vrc1.sh: run-verify17.sh (the oracle on the GPU under the defaults and
# pdl=some, attention's checks, conformance) then run-rcl1.sh (routenorm=
# cluster against the ticket form), in one call on one carry: $CARRY (default
# devrun/vr) holds petals.txz (petal of main), cuda.test.xz of main and
# ref.txz (the oracle's reference):
#   TEST=main bash docs/bench/cuda/devrun-pack.sh devrun/vr petal=main
#   tar cJf devrun/vr/ref.txz -C ../shared/oracle reference
# The tree goes without its logs and PTX but route_cl.ptx (the carry's room).
# About 5 minutes. Logs in $OUT (verify.tgz, logs.tgz, sass.tgz, env.txt).
export CARRY=${CARRY:-devrun/vr}
bash docs/bench/cuda/run-verify17.sh
bash docs/bench/cuda/run-rcl1.sh
