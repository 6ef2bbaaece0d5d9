package cuda

import (
	"fmt"
	"io/fs"
	"os"

	"petal/engine/cuda/driver"
	"petal/engine/cuda/kernels"
)

// sassEnv names the cubins loadFamily takes: unset, the binary's own
// (kernels.Embedded); "off", none (the driver compiles every module's PTX);
// else a folder as kernels/sass.sh writes it (to try cubins before they are
// embedded).
const sassEnv = "PETAL_CUDA_SASS"

// cubinDir is the folder of cubins to take, nil for none.
func cubinDir() fs.FS {
	switch v := os.Getenv(sassEnv); v {
	case "":
		return kernels.Embedded()
	case "off":
		return nil
	default:
		return os.DirFS(v)
	}
}

// checkSASSEnv refuses a PETAL_CUDA_SASS folder without a readable
// manifest, so that a mistyped path is said rather than every module
// silently compiled from its PTX.
func checkSASSEnv() error {
	v := os.Getenv(sassEnv)
	if v == "" || v == "off" {
		return nil
	}
	if _, err := kernels.Manifest(os.DirFS(v)); err != nil {
		return fmt.Errorf("cuda: %s=%s: %w (want a folder that kernels/sass.sh wrote, or off)", sassEnv, v, err)
	}
	return nil
}

// loadFamily loads the module of a kernel family (LoadFamily).
func loadFamily(c *driver.Context, family string) (*driver.Module, error) {
	m, _, err := LoadFamily(c, family)
	return m, err
}

// LoadFamily loads the module of a kernel family as the backend does: its
// cubin for this GPU where one is current (no compile at load; prebuilt
// true), else its PTX, which the driver compiles (or finds in its cache). A
// cubin the driver refuses (a driver older than the ptxas that made it)
// falls back to the PTX too.
func LoadFamily(c *driver.Context, family string) (m *driver.Module, prebuilt bool, err error) {
	if dir := cubinDir(); dir != nil {
		d := c.Device()
		if image, err := kernels.Cubin(dir, family, d.Major, d.Minor); err == nil {
			if m, err := c.LoadModule(image, family); err == nil {
				return m, true, nil
			}
		}
	}
	ptx, err := kernels.PTX(family)
	if err != nil {
		return nil, false, err
	}
	m, err = c.LoadModule(ptx, family)
	return m, false, err
}

// cubinsMissing are those of families that have no current cubin for this
// GPU, and so load from their PTX.
func cubinsMissing(c *driver.Context, families []string) []string {
	dir := cubinDir()
	if dir == nil {
		return families
	}
	d := c.Device()
	var out []string
	for _, f := range families {
		if _, err := kernels.Cubin(dir, f, d.Major, d.Minor); err != nil {
			out = append(out, f)
		}
	}
	return out
}
