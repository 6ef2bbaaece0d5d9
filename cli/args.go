package cli

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// hoistFlags moves a command's flags in front of its positional arguments,
// so "petal batch jobs.jsonl -o out.jsonl" works as users type it (urfave/cli
// v2 stops reading flags at the first argument). Everything after "--" stays
// positional.
func hoistFlags(app *cli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	cmd := app.Command(args[1])
	if cmd == nil {
		return args
	}
	head := args[:2]
	rest := args[2:]
	if len(cmd.Subcommands) > 0 && len(rest) > 0 {
		if sub := cmd.Command(rest[0]); sub != nil {
			head, rest, cmd = args[:3], args[3:], sub
		}
	}
	var flags, positional []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		switch {
		case a == "--":
			positional = append(positional, rest[i:]...)
			i = len(rest)
		case len(a) > 1 && a[0] == '-' && !isNumber(a):
			flags = append(flags, a)
			if !strings.Contains(a, "=") && takesValue(cmd, strings.TrimLeft(a, "-")) && i+1 < len(rest) {
				i++
				flags = append(flags, rest[i])
			}
		default:
			positional = append(positional, a)
		}
	}
	out := append(append([]string{}, head...), flags...)
	return append(out, positional...)
}

func takesValue(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false // unknown flags are reported by the parser
}

func isNumber(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return true
}
