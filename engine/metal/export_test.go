package metal

import "petal/engine/backend"

// Entries is the entry points a program of this package dispatches, in
// order (for the tests of package metal_test, which see only the
// backend's exported API).
func Entries(p backend.Program) []string {
	q, ok := p.(*program)
	if !ok {
		return nil
	}
	var out []string
	for _, c := range q.cmds {
		if !c.Barrier {
			out = append(out, c.Kernel.Name())
		}
	}
	return out
}
