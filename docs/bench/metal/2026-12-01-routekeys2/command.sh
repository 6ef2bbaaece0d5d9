# From the repository root, devrun/rbt/metal.test.gz (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c ./engine/metal/cudarun):
cd devrun/rbt && gunzip -f metal.test.gz && chmod +x metal.test && D=$(pwd)
cd /tmp && PETAL_CUDA_REQUIRE=1 timeout 120 $D/metal.test -test.v -test.run 'TestQMVGroup|TestRoute' > $OUT/metal.txt 2>&1
