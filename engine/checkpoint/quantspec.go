package checkpoint

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// QuantSpec is how one module is quantised. Bits is 0 for a module that is
// stored unquantised.
type QuantSpec struct {
	Bits, GroupSize int
	Mode            string // "affine"
}

// Quantized reports whether the module is stored as packed codes.
func (q QuantSpec) Quantized() bool { return q.Bits > 0 }

// quantTable is config.json's quantization block: defaults plus per-module
// overrides keyed by normalised module path.
type quantTable struct {
	present   bool
	defaults  QuantSpec
	overrides map[string]QuantSpec
}

// spec returns the quantisation of a module (normalised path).
func (q *quantTable) spec(module string) QuantSpec {
	if s, ok := q.overrides[module]; ok {
		return s
	}
	if q.present {
		return q.defaults
	}
	return QuantSpec{}
}

// parseQuantTable reads the top-level "quantization" block of config.json,
// or its "quantization_config" copy. Absent means an unquantised checkpoint.
//
// Layout (spec 3.3): {"group_size": 64, "bits": 4, "mode": "affine",
// "language_model.model.layers.0.mlp.gate": {"group_size": 64, "bits": 8},
// ...}; an override may also be false (module left unquantised).
func parseQuantTable(data []byte) (quantTable, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return quantTable{}, fmt.Errorf("checkpoint: config.json: %v", err)
	}
	key := "quantization"
	block := top[key]
	if isNull(block) {
		key = "quantization_config"
		block = top[key]
	}
	if isNull(block) {
		return quantTable{}, nil
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(block, &entries); err != nil {
		return quantTable{}, fmt.Errorf("checkpoint: config.json: %s: %v", key, err)
	}
	for _, f := range []string{"group_size", "bits"} {
		if _, ok := entries[f]; !ok {
			return quantTable{}, fmt.Errorf("checkpoint: config.json: %s.%s is missing", key, f)
		}
	}
	defaults, err := parseQuantSpec(key, entries, QuantSpec{Mode: "affine"})
	if err != nil {
		return quantTable{}, err
	}
	q := quantTable{present: true, defaults: defaults, overrides: map[string]QuantSpec{}}
	for path, v := range entries {
		var override map[string]json.RawMessage
		switch {
		case string(bytes.TrimSpace(v)) == "false":
			override = nil
		case json.Unmarshal(v, &override) == nil && override != nil:
		default:
			continue // the defaults themselves, or keys that are not module paths
		}
		module, ok := normaliseModule(path)
		if !ok {
			continue // vision tower and other modules outside the text model
		}
		spec := QuantSpec{}
		if override != nil {
			if spec, err = parseQuantSpec(key+"."+path, override, defaults); err != nil {
				return quantTable{}, err
			}
		}
		q.overrides[module] = spec
	}
	return q, nil
}

// parseQuantSpec reads group_size, bits and mode, inheriting absent ones.
func parseQuantSpec(where string, m map[string]json.RawMessage, inherit QuantSpec) (QuantSpec, error) {
	s := inherit
	for _, f := range []struct {
		name string
		dst  *int
	}{{"group_size", &s.GroupSize}, {"bits", &s.Bits}} {
		raw, ok := m[f.name]
		if !ok {
			continue
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			return QuantSpec{}, fmt.Errorf("checkpoint: config.json: %s.%s: want an integer, got %s", where, f.name, raw)
		}
	}
	if raw, ok := m["mode"]; ok {
		if err := json.Unmarshal(raw, &s.Mode); err != nil {
			return QuantSpec{}, fmt.Errorf("checkpoint: config.json: %s.mode: want a string, got %s", where, raw)
		}
	}
	if s.Mode != "affine" {
		return QuantSpec{}, fmt.Errorf("checkpoint: config.json: %s.mode %q is not supported (affine)", where, s.Mode)
	}
	if s.Bits != 4 && s.Bits != 8 {
		return QuantSpec{}, fmt.Errorf("checkpoint: config.json: %s.bits is %d, want 4 or 8", where, s.Bits)
	}
	if s.GroupSize <= 0 || s.GroupSize%(32/s.Bits) != 0 {
		return QuantSpec{}, fmt.Errorf("checkpoint: config.json: %s.group_size is %d, want a positive multiple of %d", where, s.GroupSize, 32/s.Bits)
	}
	return s, nil
}

// RequireQuantized refuses a checkpoint whose config.json has no
// quantization block, in one message: petal runs MLX affine-quantised
// conversions only, and binding such a checkpoint module by module would
// report every one of them.
func (c *Checkpoint) RequireQuantized() error {
	if c.quant.present {
		return nil
	}
	stored := ""
	if t, ok := c.tensors["model.embed_tokens.weight"]; ok {
		stored = fmt.Sprintf(" (its embedding is stored as %s)", t.DType)
	}
	return fmt.Errorf("checkpoint: %s: config.json has no quantization block: not an MLX-quantised checkpoint%s; "+
		"petal runs MLX affine 4-bit conversions only: make one with mlx_lm.convert --hf-path <model> -q "+
		"(mlx_vlm.convert --hf-path <model> -q for the vision-language repos), or download an mlx-community 4-bit model",
		c.Dir, stored)
}
