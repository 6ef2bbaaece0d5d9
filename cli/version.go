package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// builtBackends are the backends newBackend accepts in this build (metal
// opens on macOS with Apple silicon only, cuda where an NVIDIA GPU is).
var builtBackends = []string{"cpu", "cuda", "metal"}

// versionText is what --version prints: petal's version, the commit it was
// built from (stamped by go build from a git checkout), the Go toolchain and
// target, and the backends built in.
func versionText() string {
	version, commit := "(devel)", "unknown (this build carries no VCS stamp: go build -buildvcs=true in a git checkout adds it)"
	if info, ok := debug.ReadBuildInfo(); ok {
		if v := info.Main.Version; v != "" {
			version = v
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if rev := settings["vcs.revision"]; rev != "" {
			commit = rev
			var notes []string
			if t := settings["vcs.time"]; t != "" {
				notes = append(notes, t)
			}
			if settings["vcs.modified"] == "true" {
				notes = append(notes, "with uncommitted changes")
			}
			if len(notes) > 0 {
				commit += " (" + strings.Join(notes, ", ") + ")"
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "petal %s\n", version)
	fmt.Fprintf(&b, "commit %s\n", commit)
	fmt.Fprintf(&b, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "backends: %s\n", strings.Join(builtBackends, ", "))
	return b.String()
}

func printVersion(w io.Writer) { io.WriteString(w, versionText()) }
