//go:build linux

package cudarun

import (
	"flag"
	"os"
	"testing"

	"petal/engine/cuda/cudatest"
)

// TestMain runs the tests, then, where a GPU ran all of them (no -run) and
// they passed, checks that every entry point of every embedded PTX was
// launched: a kernel added to a .metal file without a test here fails.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && cudatest.Opened() && flag.Lookup("test.run").Value.String() == "" {
		for _, fam := range Families() {
			names, err := Entries(fam)
			if err != nil {
				println(err.Error())
				code = 1
			}
			println("cudarun: " + fam + ".metal: every entry point ran")
			for _, n := range names {
				if _, ok := launched.Load(n); !ok {
					println("cudarun: " + fam + ".metal entry " + n + " was not run by any test")
					code = 1
				}
			}
		}
	}
	os.Exit(code)
}

// TestEntriesFound: every family's PTX has entry points, and each is one of
// metal2cu's (named as in the .metal source).
func TestEntriesFound(t *testing.T) {
	fams := Families()
	if len(fams) != 7 {
		t.Fatalf("families %v, want attn, gdn, moe, ops, qmv, route, sample", fams)
	}
	total := 0
	for _, f := range fams {
		names, err := Entries(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) == 0 {
			t.Errorf("%s.ptx has no entry points", f)
		}
		total += len(names)
	}
	if total != 46 {
		t.Errorf("%d entry points, want the 46 the tests launch", total)
	}
}
