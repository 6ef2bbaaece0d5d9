package kernels

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
	"testing/fstest"
)

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := gzip.NewWriter(&buf)
	if _, err := z.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestCubinTakesOnlyCurrentMachineCode: a cubin is returned for a GPU it
// runs on while the manifest's sum is the embedded PTX's; a stale sum, a
// GPU of another capability, a family without one, a file that is not an
// ELF image and a torn manifest are each refused with a reason.
func TestCubinTakesOnlyCurrentMachineCode(t *testing.T) {
	sum, err := PTXSum("probe")
	if err != nil {
		t.Fatal(err)
	}
	elf := append([]byte("\x7fELF"), 1, 2, 3)
	dir := fstest.MapFS{
		"manifest.txt":           {Data: []byte("# comment\nprobe sm_90 " + sum + " V13.0.48\nsample sm_90a " + strings.Repeat("0", 64) + " V13.0.48\nattn sm_90 " + func() string { s, _ := PTXSum("attn"); return s }() + " V13.0.48\n")},
		"probe.sm_90.cubin.gz":   {Data: gz(t, elf)},
		"sample.sm_90a.cubin.gz": {Data: gz(t, elf)},
		"attn.sm_90.cubin.gz":    {Data: gz(t, []byte("not an image"))},
	}
	if b, err := Cubin(dir, "probe", 9, 0); err != nil || !bytes.Equal(b, elf) {
		t.Errorf("probe on 9.0: %q, %v; want the image", b, err)
	}
	for _, c := range []struct {
		family       string
		major, minor int
		want         string
	}{
		{"probe", 8, 9, "no probe cubin for compute capability 8.9"},
		{"probe", 10, 0, "no probe cubin for compute capability 10.0"},
		{"sample", 9, 0, "stale"},
		{"gemm", 9, 0, "no gemm cubin"},
		{"attn", 9, 0, "not an ELF image"},
		{"nosuch", 9, 0, "no PTX"},
	} {
		if _, err := Cubin(dir, c.family, c.major, c.minor); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s on %d.%d: %v, want an error saying %q", c.family, c.major, c.minor, err, c.want)
		}
	}
	torn := fstest.MapFS{"manifest.txt": {Data: []byte("probe sm_90\n")}}
	if _, err := Cubin(torn, "probe", 9, 0); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a torn manifest: %v, want its line named", err)
	}
}

func TestRunsOn(t *testing.T) {
	for _, c := range []struct {
		target       string
		major, minor int
		want         bool
	}{{"sm_90", 9, 0, true}, {"sm_90a", 9, 0, true}, {"sm_90a", 9, 1, false}, {"sm_90", 10, 0, false}, {"sm_86", 8, 9, true}, {"sm_89", 8, 6, false}, {"sm_100a", 10, 0, true}, {"compute_90", 9, 0, false}} {
		if got := RunsOn(c.target, c.major, c.minor); got != c.want {
			t.Errorf("RunsOn(%s, %d.%d) = %v, want %v", c.target, c.major, c.minor, got, c.want)
		}
	}
}

// TestEmbeddedCubins: every cubin the binary carries is listed once in its
// manifest, for a family with PTX, and is an ELF image; one whose PTX has
// changed since is reported (the backend compiles that family's PTX
// instead; sass.sh on a machine with ptxas makes them current again).
func TestEmbeddedCubins(t *testing.T) {
	dir := Embedded()
	entries, err := Manifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	stale := 0
	for _, e := range entries {
		key := e.Family + "." + e.Target
		if seen[key] {
			t.Errorf("manifest lists %s twice", key)
		}
		seen[key] = true
		sum, err := PTXSum(e.Family)
		if err != nil {
			t.Errorf("manifest lists %s, which has no PTX", e.Family)
			continue
		}
		if want, _ := Target(e.Family); want != e.Target {
			t.Errorf("%s's cubin is for %s, its PTX for %s", e.Family, e.Target, want)
		}
		if _, err := readCubin(dir, key+".cubin.gz"); err != nil {
			t.Error(err)
		}
		if sum != e.PTXSum {
			stale++
			t.Logf("%s: stale (its PTX changed since sass.sh made it); the driver compiles this family's PTX", key)
		}
	}
	t.Logf("%d cubins embedded, %d of them stale, for %d families", len(entries), stale, len(Families()))
}
