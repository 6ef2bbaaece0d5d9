//go:build !race

// Not under the race detector: its pointer checks refuse the misaligned
// slices this test makes on purpose (a checkpoint never hands one over:
// its typed views copy what is misaligned).

package metal

import (
	"math/rand/v2"
	"testing"

	"petal/engine/quant"
)

// TestUploadCopiesMisaligned: code words that do not start on 4 bytes and
// scales that do not start on 2, though inside a wrapped region, are
// copied; the biases, aligned, are bound in place.
func TestUploadCopiesMisaligned(t *testing.T) {
	b, _ := newMapping(t, DefaultOptions(), 1<<30)
	region := pageAligned(4 * page)
	mapRegion(t, b, region, page)
	src := quant.RandomMatrix(rand.New(rand.NewPCG(7, 7)), 1, 67, 192, 4, 64)
	w := upload(t, b, placed(src, region, 1002, 9001, 12000))
	if isView(w.words) || isView(w.scales) || !isView(w.biases) || w.biases.Off != 12000 {
		t.Errorf("words at 1002, scales at 9001, biases at 12000: bound %+v %+v %+v, want a copy, a copy, the view at 12000", w.words, w.scales, w.biases)
	}
	sameBytes(t, "words", w.words, bytesOf(src.Words))
	sameBytes(t, "scales", w.scales, bytesOf(src.Scales))
	sameBytes(t, "biases", w.biases, bytesOf(src.Biases))
}
