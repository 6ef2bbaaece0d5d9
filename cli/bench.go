package cli

import "github.com/urfave/cli/v2"

func benchCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure prefill and decode speed over prompt and context lengths",
		Action: func(c *cli.Context) error {
			return usageErr("bench is not built yet")
		},
	}
}
