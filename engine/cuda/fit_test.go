package cuda

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"petal/engine/backend"
)

// TestFit: a need within the free memory passes; one past it is a FitError
// whose message gives the parts, the free memory and the fixes, with a
// context that does fit.
func TestFit(t *testing.T) {
	const gb = int64(1) << 30
	n := Need{Weights: 20 * gb, State: gb / 16, Workspace: gb, KVPerToken: 40 << 10, Context: 262144, KV: backend.F32}
	n.KVCache = n.KVPerToken * int64(n.Context)
	if want := int64(512<<20) + (n.Weights+n.KVCache+n.State+n.Workspace)*3/100; n.Margin() != want {
		t.Errorf("margin %d, want %d", n.Margin(), want)
	}
	if err := Fit(n, n.Total(), 80*gb, "GPU 0 (test)"); err != nil {
		t.Errorf("exactly enough free: %v", err)
	}
	err := Fit(n, 24*gb, 24*gb, "GPU 1 (a 24 GiB GPU)")
	var fe *FitError
	if !errors.As(err, &fe) {
		t.Fatalf("24 GiB free: %v, want a FitError", err)
	}
	msg := err.Error()
	for _, want := range []string{"GPU 1 (a 24 GiB GPU)", "weights 20.00 GiB", "KV cache 10.00 GiB for 262144 tokens in f32",
		"workspace 1.00 GiB", "24.00 GiB of 24.00 GiB is free", "--max-context (at most", "kv=bf16", "a GPU with more memory"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "in use by other processes") {
		t.Errorf("an idle GPU is said to be in use: %s", msg)
	}
	if strings.Contains(msg, "--chunk") {
		t.Errorf("a chunk the need does not name is suggested smaller: %s", msg)
	}
	if strings.Contains(msg, "kvshadow") {
		t.Errorf("kvshadow=off offered where there is no shadow: %s", msg)
	}
	// the f32 cache's bf16 shadow is named, and turning it off is a fix
	shadowed := n
	shadowed.Shadow, shadowed.KVCopy, shadowed.CopyOnly = true, n.KVPerToken/2, 2<<10
	shadowed.KVCache = n.KVPerToken * int64(n.Context)
	if msg := Fit(shadowed, 24*gb, 24*gb, "GPU 1").Error(); !strings.Contains(msg, "its bf16 shadow 5.00 GiB") || !strings.Contains(msg, "kvshadow=off (") {
		t.Errorf("the shadow and kvshadow=off are not named: %s", msg)
	}
	if plain := (Need{KVPerToken: shadowed.KVPerToken, KVCopy: shadowed.CopyOnly, Weights: n.Weights, State: n.State, Workspace: n.Workspace}); plain.FittingContext(24*gb) <= shadowed.FittingContext(24*gb) {
		t.Errorf("without the shadow %d tokens fit, with it %d: want more without", plain.FittingContext(24*gb), shadowed.FittingContext(24*gb))
	}
	chunked := n
	chunked.Chunk = 4096
	if msg := Fit(chunked, 24*gb, 24*gb, "GPU 1").Error(); !strings.Contains(msg, "a smaller --chunk (the workspace of 4096-token chunks is 1.00 GiB)") {
		t.Errorf("the chunk's workspace is not named: %s", msg)
	}
	fit := n.FittingContext(24 * gb)
	shorter := n
	shorter.Context, shorter.KVCache = fit, n.KVPerToken*int64(fit)
	if fit <= 0 || Fit(shorter, 24*gb, 24*gb, "") != nil {
		t.Errorf("FittingContext %d does not fit", fit)
	}
	shorter.Context, shorter.KVCache = fit+100, n.KVPerToken*int64(fit+100)
	if Fit(shorter, 24*gb, 24*gb, "") == nil {
		t.Errorf("FittingContext %d is not the longest: %d fits too", fit, fit+100)
	}
	// weights alone too big: no context helps, and a busy GPU is named
	err = Fit(n, 8*gb, 80*gb, "GPU 0")
	if msg := err.Error(); err == nil || strings.Contains(msg, "--max-context") || !strings.Contains(msg, "72.00 GiB is in use by other processes") {
		t.Errorf("weights past the free memory: %v", err)
	}
}

// TestUploadedMatrixBytes follows Upload's layout: aligned parts, the
// interleaved scales and biases of 4-bit groups of 64, the descriptor.
// TestFitKVCopy: an f32 cache's bf16 copy for prefill (Need.KVCopy) counts
// in the total and in the longest context that fits, the message names
// it, and the kv=bf16 suggestion, which needs no copy, leaves it out.
func TestFitKVCopy(t *testing.T) {
	const gb = int64(1) << 30
	n := Need{Weights: 20 * gb, State: gb / 16, Workspace: gb, KVPerToken: 40 << 10, KVCopy: 2 << 10, Context: 262144, KV: backend.F32}
	n.KVCache = n.KVPerToken * int64(n.Context)
	plain := n
	plain.KVCopy = 0
	if d := n.Total() - plain.Total(); d < n.KVCopyBytes() || n.KVCopyBytes() != 512<<20 {
		t.Errorf("the copy adds %d to the total, want its %d bytes and their margin", d, n.KVCopyBytes())
	}
	fit := n.FittingContext(24 * gb)
	at := n
	at.Context, at.KVCache = fit, n.KVPerToken*int64(fit)
	if fit <= 0 || fit >= plain.FittingContext(24*gb) || Fit(at, 24*gb, 24*gb, "") != nil {
		t.Errorf("FittingContext %d with the copy (%d without) does not fit", fit, plain.FittingContext(24*gb))
	}
	at.Context, at.KVCache = fit+100, n.KVPerToken*int64(fit+100)
	if Fit(at, 24*gb, 24*gb, "") == nil {
		t.Errorf("FittingContext %d is not the longest with the copy", fit)
	}
	msg := Fit(n, 24*gb, 24*gb, "GPU 1").Error()
	half := plain
	half.KV, half.KVPerToken, half.KVCache = backend.BF16, n.KVPerToken/2, n.KVCache/2
	for _, want := range []string{"its bf16 copy 0.50 GiB", fmt.Sprintf("kv=bf16 (half the KV cache: %d tokens fit)", half.FittingContext(24*gb))} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
}

func TestUploadedMatrixBytes(t *testing.T) {
	// 4-bit, 512x1024 in groups of 64: words 512*1024/8*4, scales/biases 512*16*2
	words, sb := int64(512*1024/2), int64(512*16*2)
	if got, want := UploadedMatrixBytes(words, sb, sb, 4, 64), words+2*sb+2*sb+256; got != want {
		t.Errorf("4-bit: %d, want %d", got, want)
	}
	if got, want := UploadedMatrixBytes(words, sb, sb, 8, 64), words+2*sb+256; got != want {
		t.Errorf("8-bit (no interleaved copy): %d, want %d", got, want)
	}
	if got := UploadedMatrixBytes(1, 1, 1, 8, 32); got != 4*256 {
		t.Errorf("tiny parts: %d, want each aligned to 256", got)
	}
	if got := UploadedVectorBytes(100); got != 512 {
		t.Errorf("a vector of 100: %d, want 512 (float32, aligned)", got)
	}
}
