package cli

import "github.com/urfave/cli/v2"

func sessionsCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:  "sessions",
		Usage: "list, show, remove and clean up saved sessions",
		Action: func(c *cli.Context) error {
			return usageErr("sessions are not built yet")
		},
	}
}
