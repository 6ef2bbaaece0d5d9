package metal_test

import (
	"os"
	"strings"
	"testing"
)

// recordLaunched appends entries, the kernels a program of a passing test
// dispatched and checked, to the file PETAL_CUDARUN_LAUNCHED names, so that
// engine/metal/cudarun's TestEntriesLaunchedAcrossRuns counts the entry
// points only the backend's fused paths reach (run-backend.sh).
func recordLaunched(t *testing.T, entries []string) {
	path := os.Getenv("PETAL_CUDARUN_LAUNCHED")
	if path == "" {
		return
	}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = f.WriteString(strings.Join(entries, "\n") + "\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			t.Errorf("recording the launched entries: %v", err)
		}
	})
}
