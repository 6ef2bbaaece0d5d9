package session

import (
	"fmt"

	"petal/engine/backend"
)

// maxLayers bounds the layer count a header may claim (the largest models
// of the family have well under a hundred).
const maxLayers = 4096

// checkLayout verifies that a section table describes a model state: every
// layer holds either K and V (full attention) or conv and recurrent state
// (Gated DeltaNet), in layer order; K and V hold the same whole number of
// values per token in every attention layer; conv and recurrent states have
// one size across DeltaNet layers; K and V sections have one float element
// type in every layer, conv and recurrent ones f32. Sizes against a
// concrete model are checked again by model.Restore.
func checkLayout(tokens uint64, layers uint32, table []section) error {
	if layers == 0 || layers > maxLayers {
		return fmt.Errorf("%d layers, want 1 to %d", layers, maxLayers)
	}
	if len(table) != 2*int(layers) {
		return fmt.Errorf("%d sections for %d layers, want two per layer", len(table), layers)
	}
	var kvWidth, convLen, recurLen uint64
	var kvSeen, deltaSeen bool
	var kvType backend.DType
	for i := 0; i < len(table); i += 2 {
		a, b := table[i], table[i+1]
		layer := uint32(i / 2)
		if a.layer != layer || b.layer != layer {
			return fmt.Errorf("section %d belongs to layer %d, %d, want layer %d", i, a.layer, b.layer, layer)
		}
		switch {
		case a.kind == kindK && b.kind == kindV:
			if a.count != b.count {
				return fmt.Errorf("layer %d has %d K values and %d V values", layer, a.count, b.count)
			}
			w := uint64(0)
			if tokens > 0 {
				if a.count%tokens != 0 {
					return fmt.Errorf("layer %d K cache of %d values is not a whole number of rows for %d tokens", layer, a.count, tokens)
				}
				w = a.count / tokens
			} else if a.count != 0 {
				return fmt.Errorf("layer %d K cache has %d values for no tokens", layer, a.count)
			}
			if kvSeen && w != kvWidth {
				return fmt.Errorf("layer %d K cache has %d values per token, an earlier layer %d", layer, w, kvWidth)
			}
			if a.dtype != b.dtype || !a.dtype.IsFloat() || kvSeen && a.dtype != kvType {
				return fmt.Errorf("layer %d K and V caches are %s and %s, want one float type in every layer", layer, a.dtype, b.dtype)
			}
			kvSeen, kvWidth, kvType = true, w, a.dtype
		case a.kind == kindConv && b.kind == kindRecur:
			if a.dtype != backend.F32 || b.dtype != backend.F32 {
				return fmt.Errorf("layer %d conv and recurrent states are %s and %s, want f32", layer, a.dtype, b.dtype)
			}
			if a.count == 0 || b.count == 0 {
				return fmt.Errorf("layer %d has an empty conv or recurrent state", layer)
			}
			if deltaSeen && (a.count != convLen || b.count != recurLen) {
				return fmt.Errorf("layer %d conv/recurrent sizes %d/%d differ from an earlier layer's %d/%d", layer, a.count, b.count, convLen, recurLen)
			}
			deltaSeen, convLen, recurLen = true, a.count, b.count
		default:
			return fmt.Errorf("layer %d has sections %s and %s, want K and V or conv and recurrent", layer, kindName(a.kind), kindName(b.kind))
		}
	}
	return nil
}

func kindName(k uint32) string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind %d", k)
}
