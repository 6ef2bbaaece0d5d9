package cli

import (
	"bytes"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"petal/jobs"
)

func mergeCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:      "merge",
		Usage:     "join the outputs of batch shards back into input order",
		ArgsUsage: "OUT...",
		Description: `Reads result files written by petal batch --shard I/N (in any order) and writes one file in the
order of the input lines, using each result's "line" field. A line answered twice is an error.
With --jobs FILE (the original job file) it also checks that every job has exactly one result,
that none was cut short by an interrupt (finish_reason "cancelled"), and that each answers the
job line it names (its "line_hash"). Nothing is written when there is an error; -o is written
whole or not at all, so "petal merge out.jsonl -o out.jsonl" puts a resumed file back in order.

  petal batch jobs.jsonl --shard 0/2 -o part0.jsonl
  petal batch jobs.jsonl --shard 1/2 -o part1.jsonl
  petal merge part0.jsonl part1.jsonl --jobs jobs.jsonl -o results.jsonl`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "merged file; - or none: standard output. May be one of the inputs, never the --jobs file"},
			&cli.StringFlag{Name: "jobs", Usage: "the job file the shards ran, to check that every job has one whole result that answers its line"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usageErr("merge needs the shard result files")
			}
			outPath := c.String("output")
			if outPath == "-" {
				outPath = "" // standard output
			}
			var inputs []io.Reader
			for _, path := range c.Args().Slice() {
				f, err := openInput(path)
				if err != nil {
					return err
				}
				defer f.Close()
				inputs = append(inputs, f)
			}
			var merged bytes.Buffer
			if jf := c.String("jobs"); jf != "" {
				f, err := openInput(jf)
				if err != nil {
					return err
				}
				defer f.Close()
				// -o over a result file sorts it in place; over the job file it
				// would destroy the jobs
				if outPath != "" {
					if err := refuseSameFile(f, jf, outPath); err != nil {
						return err
					}
				}
				lines, err := jobs.JobLines(f)
				if err != nil {
					return usageErr("reading %s: %v", jf, err)
				}
				if err := jobs.MergeComplete(&merged, lines, inputs...); err != nil {
					return err
				}
			} else if err := jobs.Merge(&merged, inputs...); err != nil {
				return err
			}
			if outPath != "" {
				// written whole or not at all, even over one of the inputs
				err := jobs.ReplaceFile(outPath, func(w io.Writer) error {
					_, err := w.Write(merged.Bytes())
					return err
				})
				if err != nil {
					return fmt.Errorf("merge: %w", err)
				}
				return nil
			}
			_, err := st.Out.Write(merged.Bytes())
			return err
		},
	}
}
