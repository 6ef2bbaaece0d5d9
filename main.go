// Command petal runs Qwen3.5/3.6 hybrid mixture-of-experts models locally.
package main

import (
	"context"
	"os"
	"os/signal"

	"golang.org/x/term"

	"petal/cli"
)

func main() {
	// The first Ctrl-C lets the current job finish its line; a second one
	// kills the process as usual.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := cli.Main(ctx, os.Args, cli.Streams{
		In: os.Stdin, Out: os.Stdout, Err: os.Stderr,
		InIsTerminal:  term.IsTerminal(int(os.Stdin.Fd())),
		OutIsTerminal: term.IsTerminal(int(os.Stdout.Fd())),
		ErrIsTerminal: term.IsTerminal(int(os.Stderr.Fd())),
	})
	os.Exit(code)
}
