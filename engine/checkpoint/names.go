package checkpoint

import "strings"

// skippedPrefixes are the namespaces of the vision tower and the
// multi-token-prediction head, which the text engine never uses.
var skippedPrefixes = []string{
	"vision_tower.", "model.visual.", "visual.",
	"mtp.", "language_model.mtp.", "model.mtp.",
}

// renamedPrefixes map the MLX (mlx-lm, mlx-vlm) and Hugging Face spellings
// of the text model onto one namespace. Order matters: the longest first.
var renamedPrefixes = []struct{ from, to string }{
	{"language_model.model.", "model."},
	{"model.language_model.", "model."},
	{"language_model.lm_head.", "lm_head."},
	{"lm_head.", "lm_head."},
	{"model.", "model."},
}

// normaliseName maps an original tensor name to the text model's namespace
// (model.* or lm_head.*). ok is false for tensors outside it.
func normaliseName(name string) (string, bool) {
	for _, p := range skippedPrefixes {
		if strings.HasPrefix(name, p) {
			return "", false
		}
	}
	for _, r := range renamedPrefixes {
		if rest, ok := strings.CutPrefix(name, r.from); ok && rest != "" {
			return r.to + rest, true
		}
	}
	return "", false
}

// normaliseModule is normaliseName for a module path, which has no trailing
// component: "language_model.lm_head" becomes "lm_head".
func normaliseModule(path string) (string, bool) {
	n, ok := normaliseName(path + ".x")
	if !ok {
		return "", false
	}
	return strings.TrimSuffix(n, ".x"), true
}
