package cpu

import (
	"fmt"
	"strconv"

	"petal/engine/backend"
)

// OptionsHelp lists the options of "--backend cpu:KEY=VALUE,...".
const OptionsHelp = `delta=sequential|chunked|auto (the form of the gated delta rule; default sequential), ` +
	`delta-chunk=N (block length of the chunked form, 1 to 128; default 16), ` +
	`kv=f32|bf16 (element type of the KV cache; default f32)`

// ParseOptions reads the options of a backend Spec named cpu.
func ParseOptions(opts []backend.Option) (Options, error) {
	var o Options
	for _, kv := range opts {
		switch kv.Key {
		case "delta":
			if _, err := parseDeltaForm(kv.Value); err != nil {
				return Options{}, err
			}
			o.DeltaRule = kv.Value
		case "delta-chunk":
			n, err := strconv.Atoi(kv.Value)
			if err != nil {
				return Options{}, fmt.Errorf("cpu: delta-chunk=%q is not a number", kv.Value)
			}
			o.DeltaChunk = n
		case "kv":
			t, err := kv.KVType("cpu")
			if err != nil {
				return Options{}, err
			}
			o.KV = t
		default:
			return Options{}, fmt.Errorf("cpu: unknown option %q (the options are %s)", kv.Key, OptionsHelp)
		}
	}
	return o, nil
}
