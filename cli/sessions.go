package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"petal/engine/session"
)

func sessionsCommand(st *Streams) *cli.Command {
	dirFlag := storeFlag()
	jsonFlag := &cli.BoolFlag{Name: "json", Usage: "print JSON"}
	return &cli.Command{
		Name:  "sessions",
		Usage: "list, show, verify, remove and clean up saved sessions",
		Description: `A session (petal run --session NAME, or "session" on a job line) keeps its conversation and a
snapshot of the model state at each turn boundary in the session store, so a later turn, in any
process, continues without prefilling the conversation again. These commands manage the store:
verify reads every byte of its snapshots and names each damaged file (exit 1 when there is one);
gc also removes the temporary files of killed writers.`,
		Subcommands: []*cli.Command{
			{
				Name: "list", Usage: "list sessions: snapshots kept, tokens, size, last use, damaged headers",
				Flags: []cli.Flag{dirFlag, jsonFlag},
				Action: func(c *cli.Context) error {
					store, err := openStoreForManagement(st, c.String("sessions"))
					if err != nil {
						return err
					}
					infos, err := store.List()
					if err != nil {
						return err
					}
					if c.Bool("json") {
						return printJSON(st, sessionInfos(infos))
					}
					if len(infos) == 0 {
						fmt.Fprintf(st.Err, "petal: no sessions in %s\n", store.Dir)
						return nil
					}
					w := tabwriter.NewWriter(st.Out, 2, 8, 2, ' ', 0)
					fmt.Fprintln(w, "NAME\tSNAPSHOTS\tTOKENS\tSIZE\tMODIFIED\tMODEL\tSTATUS")
					damaged := false
					for _, in := range infos {
						tokens, model, status := strconv.Itoa(in.Tokens), in.Fingerprint.Short(), "ok"
						if in.Err != nil {
							tokens, model = "?", "?" // the latest snapshot's header cannot be read
						}
						if in.Damaged > 0 {
							status, damaged = fmt.Sprintf("%d damaged", in.Damaged), true
						}
						fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", in.Name, in.Turns, tokens, humanBytes(in.Bytes), in.Modified.Format(time.DateTime), model, status)
					}
					if err := w.Flush(); err != nil {
						return err
					}
					if damaged {
						fmt.Fprintln(st.Err, "petal: some snapshots are damaged: `petal sessions verify` names each file and why")
					}
					return nil
				},
			},
			{
				Name: "show", Usage: "describe a session and each of its snapshots, checking every byte (exit 1 when one is damaged)", ArgsUsage: "NAME",
				Flags: []cli.Flag{dirFlag, jsonFlag},
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return usageErr("sessions show needs one session NAME")
					}
					store, err := openStoreForManagement(st, c.String("sessions"))
					if err != nil {
						return err
					}
					d, err := store.Show(c.Args().First())
					if err != nil {
						return usageErr("%v", err)
					}
					conv, convErr := store.Conversation(d.Name)
					if c.Bool("json") {
						out := sessionInfos([]session.Info{d.Info})[0]
						snaps := []map[string]any{}
						for _, sn := range d.Snapshots {
							snaps = append(snaps, snapshotJSON(sn))
						}
						out["snapshots"] = snaps
						if convErr != nil {
							out["conversation_error"] = convErr.Error()
						}
						var msgs any
						if conv != nil {
							msgs = conv.Messages
						}
						out["conversation"] = msgs
						return printJSON(st, out)
					}
					if d.Err != nil {
						fmt.Fprintf(st.Out, "session %s: %d snapshots kept, %s, the latest DAMAGED\n", d.Name, d.Turns, humanBytes(d.Bytes))
					} else {
						fmt.Fprintf(st.Out, "session %s: %d snapshots kept, %d tokens, %s, model %s\n", d.Name, d.Turns, d.Tokens, humanBytes(d.Bytes), d.Fingerprint.Short())
					}
					for _, sn := range d.Snapshots {
						if sn.Err != nil {
							fmt.Fprintf(st.Out, "  snapshot %d: DAMAGED, %s, %s, %s: %v\n", sn.Turn, humanBytes(sn.Bytes), sn.Modified.Format(time.DateTime), sn.File, snapshotReason(sn.Err))
							continue
						}
						fmt.Fprintf(st.Out, "  snapshot %d: %d tokens, %s, %s, %s\n", sn.Turn, sn.Tokens, humanBytes(sn.Bytes), sn.Modified.Format(time.DateTime), sn.File)
					}
					switch {
					case convErr != nil:
						fmt.Fprintf(st.Out, "  conversation: DAMAGED: %v\n", convErr)
					case conv != nil:
						fmt.Fprintf(st.Out, "  conversation: %d messages, %d turns recorded\n", len(conv.Messages), len(conv.Turns))
					}
					if d.Damaged > 0 || convErr != nil {
						return &exitError{ExitJobsFailed, fmt.Errorf("session %s has damaged files", d.Name)}
					}
					return nil
				},
			},
			{
				Name: "verify", Usage: "read every byte of the snapshots and conversations of the named sessions (default: the whole store, prefix snapshots included); exit 1 naming each damaged file",
				ArgsUsage: "[NAME...]",
				Flags:     []cli.Flag{dirFlag, jsonFlag},
				Action: func(c *cli.Context) error {
					store, err := openStoreForManagement(st, c.String("sessions"))
					if err != nil {
						return err
					}
					probs, err := store.Verify(c.Args().Slice()...)
					if errors.Is(err, session.ErrNoSession) {
						return usageErr("%v", err)
					}
					if err != nil {
						return err
					}
					if c.Bool("json") {
						out := []map[string]string{}
						for _, p := range probs {
							out = append(out, map[string]string{"file": p.File, "error": p.Err.Error()})
						}
						if err := printJSON(st, out); err != nil {
							return err
						}
					} else {
						for _, p := range probs {
							fmt.Fprintf(st.Out, "%s: %v\n", p.File, snapshotReason(p.Err))
						}
					}
					if len(probs) > 0 {
						return &exitError{ExitJobsFailed, fmt.Errorf("%d damaged files in %s", len(probs), store.Dir)}
					}
					if !c.Bool("json") {
						fmt.Fprintf(st.Err, "petal: no damaged files in %s\n", store.Dir)
					}
					return nil
				},
			},
			{
				Name: "rm", Usage: "remove sessions", ArgsUsage: "NAME...",
				Flags: []cli.Flag{dirFlag},
				Action: func(c *cli.Context) error {
					if c.NArg() == 0 {
						return usageErr("sessions rm needs the NAMEs of the sessions to remove")
					}
					store, err := openStoreForManagement(st, c.String("sessions"))
					if err != nil {
						return err
					}
					for _, name := range c.Args().Slice() {
						if err := store.Remove(name); err != nil {
							return err
						}
					}
					return nil
				},
			},
			{
				Name: "gc", Usage: "delete the oldest sessions and prefix snapshots beyond an age or a total size",
				Flags: []cli.Flag{dirFlag,
					&cli.DurationFlag{Name: "older-than", Usage: "remove what was last used longer ago than this (e.g. 720h)"},
					&cli.StringFlag{Name: "max-size", Usage: "then remove the oldest until at most this much is left (e.g. 10GB, 500MB)"},
				},
				Action: func(c *cli.Context) error {
					maxBytes, err := parseSize(c.String("max-size"))
					if err != nil {
						return usageErr("--max-size: %v", err)
					}
					if c.Duration("older-than") == 0 && maxBytes == 0 {
						return usageErr("sessions gc needs --older-than or --max-size")
					}
					store, err := openStoreForManagement(st, c.String("sessions"))
					if err != nil {
						return err
					}
					rep, err := store.GC(c.Duration("older-than"), maxBytes)
					if err != nil {
						return err
					}
					fmt.Fprintf(st.Out, "removed %d sessions, %d prefix snapshots and %d temporary files of killed writers (%s), kept %s",
						len(rep.Sessions), rep.Prefixes, rep.TempFiles, humanBytes(rep.Freed+rep.TempBytes), humanBytes(rep.Kept))
					if len(rep.Busy) > 0 {
						fmt.Fprintf(st.Out, "; skipped busy sessions %s", strings.Join(rep.Busy, ", "))
					}
					fmt.Fprintln(st.Out)
					return nil
				},
			},
		},
	}
}

// openStoreForManagement opens the store without a model: list, show, rm
// and gc need none.
func openStoreForManagement(st *Streams, dir string) (*session.Store, error) {
	if dir == "" {
		dir = st.Getenv("PETAL_SESSIONS")
	}
	if dir == "" {
		cache, err := petalCacheDir(st.Getenv)
		if err != nil {
			return nil, err
		}
		dir = filepath.Join(cache, "sessions")
	}
	return session.OpenStore(dir, session.Fingerprint{}, session.StoreOptions{})
}

func sessionInfos(infos []session.Info) []map[string]any {
	out := []map[string]any{}
	for _, in := range infos {
		m := map[string]any{"name": in.Name, "turns": in.Turns, "tokens": in.Tokens, "bytes": in.Bytes,
			"modified": in.Modified, "model": in.Fingerprint.Short(), "damaged": in.Damaged}
		if in.Err != nil {
			m["error"] = in.Err.Error()
			m["tokens"], m["model"] = nil, nil
		}
		out = append(out, m)
	}
	return out
}

// snapshotJSON is one snapshot for `sessions show --json`: snake_case keys,
// the fingerprint in hex, and why it is damaged instead of zeros.
func snapshotJSON(sn session.SnapshotInfo) map[string]any {
	m := map[string]any{"turn": sn.Turn, "file": sn.File, "bytes": sn.Bytes, "modified": sn.Modified}
	if sn.Err != nil {
		m["error"] = sn.Err.Error()
		return m
	}
	m["tokens"], m["fingerprint"] = sn.Tokens, sn.Fingerprint.String()
	return m
}

// snapshotReason is a refusal without the "session: snapshot FILE: "
// prefix, for lines that already name the file.
func snapshotReason(err error) string {
	var se *session.SnapshotError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v: %s", se.Reason, se.Detail)
	}
	return err.Error()
}

func printJSON(st *Streams, v any) error {
	enc := json.NewEncoder(st.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// parseSize reads sizes like 500MB, 10GB, 1.5G or plain bytes; "" is 0.
func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	if s == "" {
		return 0, nil
	}
	s = strings.TrimSuffix(s, "B")
	mult := 1.0
	for _, u := range []struct {
		suffix string
		m      float64
	}{{"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size such as 500MB or 10GB", s)
	}
	return int64(v * mult), nil
}
