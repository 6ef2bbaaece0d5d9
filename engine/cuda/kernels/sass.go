package kernels

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"sync"
)

// The driver compiles PTX for the GPU at load, about half a minute for all
// of petal's modules on an H100 or H200 the first time on a machine. sass/
// holds the same modules already compiled for compute capability 9.0 by a
// CUDA toolkit's ptxas (sass.sh), each with the sha256 of the PTX it was
// made from, so that a cubin is used only while its PTX is the embedded
// one: a kernel changed since is compiled by the driver as before, never
// run from stale machine code.

//go:embed sass
var sassFiles embed.FS

// Embedded is the cubins built into the binary: a folder holding
// manifest.txt and <family>.<target>.cubin.gz files, as sass.sh writes it.
func Embedded() fs.FS {
	sub, _ := fs.Sub(sassFiles, "sass")
	return sub
}

// SASS is one manifest line: the cubin of Family for Target, made from the
// PTX whose sha256 is PTXSum by the ptxas of version Compiler.
type SASS struct {
	Family, Target, PTXSum, Compiler string
}

// Manifest reads dir's manifest.txt.
func Manifest(dir fs.FS) ([]SASS, error) {
	b, err := fs.ReadFile(dir, "manifest.txt")
	if err != nil {
		return nil, fmt.Errorf("kernels: cubins: %w", err)
	}
	var out []SASS
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 4 || len(f[2]) != 2*sha256.Size {
			return nil, fmt.Errorf("kernels: cubins: manifest.txt line %d: want family, target, the PTX's sha256 and ptxas's version: %q", n, line)
		}
		out = append(out, SASS{f[0], f[1], f[2], f[3]})
	}
	return out, sc.Err()
}

// RunsOn says whether machine code for target (sm_XY, or sm_XYa for that
// capability alone) runs on a GPU of compute capability major.minor: a
// cubin runs on its major version from its minor up.
func RunsOn(target string, major, minor int) bool {
	t, ok := strings.CutPrefix(target, "sm_")
	if !ok || len(t) < 2 {
		return false
	}
	only := strings.HasSuffix(t, "a")
	t = strings.TrimSuffix(t, "a")
	cc, err := strconv.Atoi(t)
	if err != nil {
		return false
	}
	tmajor, tminor := cc/10, cc%10
	if only {
		return major == tmajor && minor == tminor
	}
	return major == tmajor && minor >= tminor
}

// ptxSums holds PTXSum's answers: a backend's New asks for every family
// twice (the compile notice, then the load), over 10 MB of PTX.
var ptxSums sync.Map

// PTXSum is the sha256 of family's embedded PTX, as the manifest records it.
func PTXSum(family string) (string, error) {
	if s, ok := ptxSums.Load(family); ok {
		return s.(string), nil
	}
	b, err := ptxFiles.ReadFile(family + ".ptx")
	if err != nil {
		return "", fmt.Errorf("kernels: no PTX for %q", family)
	}
	sum := sha256.Sum256(b)
	s := hex.EncodeToString(sum[:])
	ptxSums.Store(family, s)
	return s, nil
}

// Cubin returns family's machine code from dir for a GPU of compute
// capability major.minor, or an error that says why there is none to use:
// none built for the family or for this GPU, or built from PTX other than
// the embedded one (stale), or not a readable cubin.
func Cubin(dir fs.FS, family string, major, minor int) ([]byte, error) {
	entries, err := Manifest(dir)
	if err != nil {
		return nil, err
	}
	sum, err := PTXSum(family)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Family != family || !RunsOn(e.Target, major, minor) {
			continue
		}
		if e.PTXSum != sum {
			return nil, fmt.Errorf("kernels: the %s cubin for %s is stale (made from other PTX than this binary's; sass.sh remakes it)", family, e.Target)
		}
		return readCubin(dir, family+"."+e.Target+".cubin.gz")
	}
	return nil, fmt.Errorf("kernels: no %s cubin for compute capability %d.%d", family, major, minor)
}

// readCubin gunzips name from dir and checks it is an ELF image.
func readCubin(dir fs.FS, name string) ([]byte, error) {
	f, err := dir.Open(name)
	if err != nil {
		return nil, fmt.Errorf("kernels: cubin: %w", err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("kernels: cubin %s: %w", name, err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		return nil, fmt.Errorf("kernels: cubin %s: %w", name, err)
	}
	if !bytes.HasPrefix(b, []byte("\x7fELF")) {
		return nil, fmt.Errorf("kernels: cubin %s is not an ELF image", name)
	}
	return b, nil
}
