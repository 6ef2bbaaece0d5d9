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

// Is reads o, an option of the backend named by, as a choice between two
// values, first and second (listed in that order in the error): whether
// it is first.
func (o Option) Is(by, first, second string) (bool, error) {
	switch o.Value {
	case first:
		return true, nil
	case second:
		return false, nil
	}
	return false, fmt.Errorf("%s: %s=%q: want %s or %s", by, o.Key, o.Value, first, second)
}

// On reads o, an option of the backend named by, as a switch: on, true or
// 1; off, false or 0.
func (o Option) On(by string) (bool, error) {
	switch o.Value {
	case "on", "true", "1":
		return true, nil
	case "off", "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("%s: %s=%q: want on or off", by, o.Key, o.Value)
}

// KVType reads o, an option of the backend named by, as the element type
// of the KV cache: f32 or bf16.
func (o Option) KVType(by string) (DType, error) {
	t, err := ParseDType(o.Value)
	if err != nil || t != F32 && t != BF16 {
		return 0, fmt.Errorf("%s: %s=%q: the KV cache is f32 or bf16", by, o.Key, o.Value)
	}
	return t, nil
}
