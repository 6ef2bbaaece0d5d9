package backend

import (
	"fmt"
	"strings"
)

// Spec is a backend choice as the command line gives it,
// "NAME[:KEY=VALUE,...]": "cpu", "cpu:delta=chunked,delta-chunk=32"; the
// same form for every backend.
type Spec struct {
	Name    string
	Options []Option // in the order given
}

// Option is one KEY=VALUE of a Spec.
type Option struct{ Key, Value string }

// ParseSpec reads a Spec, refusing an empty name, an option without "=" or
// a key given twice.
func ParseSpec(s string) (Spec, error) {
	name, opts, _ := strings.Cut(s, ":")
	sp := Spec{Name: strings.ToLower(strings.TrimSpace(name))}
	if sp.Name == "" {
		return Spec{}, fmt.Errorf("backend %q: no backend name before the options", s)
	}
	if strings.TrimSpace(opts) == "" {
		return sp, nil
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(opts, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return Spec{}, fmt.Errorf("backend %q: option %q is not KEY=VALUE", s, kv)
		}
		if seen[k] {
			return Spec{}, fmt.Errorf("backend %q: option %s given twice", s, k)
		}
		seen[k] = true
		sp.Options = append(sp.Options, Option{k, v})
	}
	return sp, nil
}
