//go:build linux

package cudarun

import (
	"flag"
	"os"
	"strings"
	"testing"

	"petal/engine/cuda/cudatest"
)

// TestMain runs the tests, then, where a GPU ran all of them (no -run) and
// they passed, checks that every entry point of every embedded PTX was
// launched: a kernel added to a .metal file without a test here fails.
//
// Where the tests run in several processes (one per family, so that a
// fault ends only its own), PETAL_CUDARUN_LAUNCHED=FILE makes each append
// the entries it launched to FILE, and TestEntriesLaunchedAcrossRuns with
// PETAL_CUDARUN_CHECK_LAUNCHED=FILE then checks their union.
func TestMain(m *testing.M) {
	code := m.Run()
	if path := os.Getenv("PETAL_CUDARUN_LAUNCHED"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			launched.Range(func(k, _ any) bool {
				f.WriteString(k.(string) + "\n")
				return true
			})
			err = f.Close()
		}
		if err != nil {
			println("cudarun: " + err.Error())
			code = 1
		}
	}
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
	if len(fams) != 9 {
		t.Fatalf("families %v, want attn, gdn, gemm, gemm_tensor, moe, ops, qmv, route, sample", fams)
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
	if total != 64 {
		t.Errorf("%d entry points, want the 64 the tests launch", total)
	}
}

// TestEntriesLaunchedAcrossRuns: with PETAL_CUDARUN_CHECK_LAUNCHED=FILE
// (the entries earlier processes launched, see TestMain), every entry point
// of every family is in FILE; without it the test skips.
func TestEntriesLaunchedAcrossRuns(t *testing.T) {
	path := os.Getenv("PETAL_CUDARUN_CHECK_LAUNCHED")
	if path == "" {
		t.Skip("PETAL_CUDARUN_CHECK_LAUNCHED not set: no list of launched entries to check")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, n := range strings.Fields(string(b)) {
		ran[n] = true
	}
	for _, fam := range Families() {
		names, err := Entries(fam)
		if err != nil {
			t.Fatal(err)
		}
		missing := 0
		for _, n := range names {
			if !ran[n] {
				t.Errorf("%s.metal entry %s was not run by any test", fam, n)
				missing++
			}
		}
		if missing == 0 {
			t.Logf("%s.metal: every entry point ran (%d)", fam, len(names))
		}
	}
}
