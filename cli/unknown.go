package cli

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// unknownCommand is the usage error for a name that is no command of
// parent (the app's commands when parent is nil): it lists the commands
// there and suggests the closest one in the whole tree.
func unknownCommand(app *cli.App, parent *cli.Command, name string) error {
	cmds, path := app.Commands, "petal"
	if parent != nil {
		cmds, path = parent.Subcommands, parent.HelpName
	}
	var names []string
	for _, c := range cmds {
		if !c.Hidden && c.Name != "help" || parent == nil && c.Name == "help" {
			names = append(names, c.Name)
		}
	}
	msg := fmt.Sprintf("unknown command %q", strings.TrimPrefix(path+" "+name, "petal "))
	if s := suggestCommand(app, cmds, path, name); s != "" {
		msg += fmt.Sprintf(": did you mean %q?", s)
	}
	return usageErr("%s\ncommands of %s: %s (see %s --help)", msg, path, strings.Join(names, ", "), path)
}

// suggestCommand is the full path of the command the user most likely
// meant: one of that name anywhere in the tree (gc -> petal sessions gc),
// else the nearest name at this level within two edits, or "".
func suggestCommand(app *cli.App, level []*cli.Command, path, name string) string {
	var found string
	var walk func(cmds []*cli.Command, prefix string)
	walk = func(cmds []*cli.Command, prefix string) {
		for _, c := range cmds {
			if found == "" && c.HasName(name) {
				found = prefix + " " + c.Name
			}
			walk(c.Subcommands, prefix+" "+c.Name)
		}
	}
	walk(app.Commands, "petal")
	if found != "" {
		return found
	}
	best, bestDist := "", 3
	for _, c := range level {
		if c.Hidden {
			continue
		}
		for _, n := range c.Names() {
			if d := editDistance(name, n); d < bestDist && d < len(n) {
				best, bestDist = path+" "+c.Name, d
			}
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
