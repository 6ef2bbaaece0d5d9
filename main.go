// Command petal runs Qwen3.5/3.6 hybrid mixture-of-experts models locally.
package main

import (
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"

	"golang.org/x/term"

	"petal/cli"
)

func main() { os.Exit(run()) }

func run() int {
	// The first Ctrl-C or SIGTERM lets the current job finish its line; a
	// second one kills the process as usual.
	ctx, stop := cli.InterruptContext()
	defer stop()
	// PETAL_CPUPROFILE=FILE writes a Go CPU profile of the whole run, for
	// finding where time goes on a machine (go tool pprof FILE);
	// PETAL_CPUPROFILE_HZ samples more often than pprof's 100 a second,
	// for steps of a few milliseconds (the runtime then warns that the
	// rate was already set).
	if path := os.Getenv("PETAL_CPUPROFILE"); path != "" {
		if hz, err := strconv.Atoi(os.Getenv("PETAL_CPUPROFILE_HZ")); err == nil && hz > 0 {
			runtime.SetCPUProfileRate(hz)
		}
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			defer f.Close()
			defer pprof.StopCPUProfile()
		}
	}
	return cli.Main(ctx, os.Args, cli.Streams{
		In: os.Stdin, Out: os.Stdout, Err: os.Stderr,
		InIsTerminal:  term.IsTerminal(int(os.Stdin.Fd())),
		OutIsTerminal: term.IsTerminal(int(os.Stdout.Fd())),
		ErrIsTerminal: term.IsTerminal(int(os.Stderr.Fd())),
	})
}
