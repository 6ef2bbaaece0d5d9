package tokenizer

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/dlclark/regexp2/v2"
	"github.com/tidwall/gjson"
	"golang.org/x/text/unicode/norm"
)

func isNull(v gjson.Result) bool { return !v.Exists() || v.Type == gjson.Null }

func parseNormalizer(v gjson.Result, path string) ([]norm.Form, error) {
	if isNull(v) {
		return nil, nil
	}
	switch typ := v.Get("type").String(); typ {
	case "NFC":
		return []norm.Form{norm.NFC}, nil
	case "NFD":
		return []norm.Form{norm.NFD}, nil
	case "NFKC":
		return []norm.Form{norm.NFKC}, nil
	case "NFKD":
		return []norm.Form{norm.NFKD}, nil
	case "Sequence":
		var forms []norm.Form
		for i, sub := range v.Get("normalizers").Array() {
			f, err := parseNormalizer(sub, fmt.Sprintf("%s.normalizers[%d]", path, i))
			if err != nil {
				return nil, err
			}
			forms = append(forms, f...)
		}
		return forms, nil
	default:
		return nil, fmt.Errorf("%s.type %q is not supported (want NFC, NFD, NFKC, NFKD or a Sequence of them)", path, typ)
	}
}

// preStep is one pre-tokenizer of tokenizer.json, with its JSON path for error messages.
type preStep struct {
	v    gjson.Result
	path string
}

func flattenPreTokenizer(v gjson.Result, path string, out []preStep) []preStep {
	if v.Get("type").String() != "Sequence" {
		return append(out, preStep{v, path})
	}
	for i, sub := range v.Get("pretokenizers").Array() {
		out = flattenPreTokenizer(sub, fmt.Sprintf("%s.pretokenizers[%d]", path, i), out)
	}
	return out
}

// parsePreTokenizer accepts any number of Split steps followed by one ByteLevel step: the shape
// of Qwen's own files and of the plain ByteLevel files that transformers writes.
func parsePreTokenizer(v gjson.Result) (preTokenizer, error) {
	var p preTokenizer
	if isNull(v) {
		return p, errors.New("pre_tokenizer is missing (want a ByteLevel step)")
	}
	steps := flattenPreTokenizer(v, "pre_tokenizer", nil)
	for i, s := range steps {
		switch typ := s.v.Get("type").String(); typ {
		case "Split":
			re, err := parseSplit(s.v, s.path)
			if err != nil {
				return p, err
			}
			p.splits = append(p.splits, re)
		case "ByteLevel":
			if i != len(steps)-1 {
				return p, fmt.Errorf("%s: ByteLevel must be the last pre-tokenizer step", s.path)
			}
			p.prefixSpace = s.v.Get("add_prefix_space").Bool()
			// HF's default for a missing use_regex is true.
			if useRegex := s.v.Get("use_regex"); !useRegex.Exists() || useRegex.Bool() {
				re, err := compileSplit(gpt2Pattern)
				if err != nil {
					return p, fmt.Errorf("%s: GPT-2 split regex: %w", s.path, err)
				}
				p.byteRegex = re
			}
			return p, nil
		default:
			return p, fmt.Errorf("%s.type %q is not supported (want Split or ByteLevel)", s.path, typ)
		}
	}
	return p, errors.New("pre_tokenizer has no ByteLevel step, so the vocabulary is not byte-level")
}

func parseSplit(v gjson.Result, path string) (*regexp2.Regexp, error) {
	if b := v.Get("behavior").String(); b != "Isolated" {
		return nil, fmt.Errorf("%s.behavior %q is not supported (want \"Isolated\")", path, b)
	}
	if v.Get("invert").Bool() {
		return nil, fmt.Errorf("%s.invert true is not supported", path)
	}
	var pattern string
	if r := v.Get("pattern.Regex"); r.Type == gjson.String {
		pattern = r.String()
	} else if s := v.Get("pattern.String"); s.Type == gjson.String {
		pattern = regexp2.Escape(s.String())
	} else {
		return nil, fmt.Errorf("%s.pattern has neither Regex nor String", path)
	}
	re, err := compileSplit(pattern)
	if err != nil {
		return nil, fmt.Errorf("%s.pattern: %w", path, err)
	}
	return re, nil
}

func parseModel(v gjson.Result, t *Tokenizer) error {
	switch typ := v.Get("type"); {
	case !typ.Exists():
		return errors.New("model.type is missing (want \"BPE\")")
	case typ.String() != "BPE":
		return fmt.Errorf("model.type %q is not supported (want \"BPE\")", typ.String())
	}
	if d := v.Get("dropout"); !isNull(d) && d.Float() != 0 {
		return fmt.Errorf("model.dropout %v is not supported", d.Float())
	}
	for _, field := range []string{"continuing_subword_prefix", "end_of_word_suffix"} {
		if s := v.Get(field); !isNull(s) && s.String() != "" {
			return fmt.Errorf("model.%s %q is not supported", field, s.String())
		}
	}
	if v.Get("byte_fallback").Bool() {
		return errors.New("model.byte_fallback true is not supported")
	}
	vocab := v.Get("vocab")
	if !vocab.IsObject() {
		return errors.New("model.vocab is not an object")
	}
	t.vocab = make(map[string]int, 1<<16)
	var err error
	vocab.ForEach(func(key, value gjson.Result) bool {
		id, ok := jsonID(value)
		if !ok {
			err = fmt.Errorf("model.vocab[%q]: id %s is not a non-negative integer", key.String(), value.Raw)
			return false
		}
		t.vocab[key.String()] = id
		return true
	})
	if err != nil {
		return err
	}
	m := &t.model
	m.unkID = -1
	if unk := v.Get("unk_token"); !isNull(unk) {
		id, ok := t.vocab[unk.String()]
		if !ok {
			return fmt.Errorf("model.unk_token %q is not in the vocabulary", unk.String())
		}
		m.unkID = int32(id)
	}
	m.fuseUnk = v.Get("fuse_unk").Bool()
	m.ignoreMerges = v.Get("ignore_merges").Bool()
	for b := range m.byteIDs {
		m.byteIDs[b] = -1
		if id, ok := t.vocab[string(byteToRune[b])]; ok {
			m.byteIDs[b] = int32(id)
		}
	}
	return parseMerges(v.Get("merges"), t)
}

// jsonID reads a token id: a non-negative integer that fits an int32.
func jsonID(v gjson.Result) (int, bool) {
	if v.Type != gjson.Number {
		return 0, false
	}
	f := v.Float()
	if f < 0 || f > math.MaxInt32 || f != math.Trunc(f) {
		return 0, false
	}
	return int(f), true
}

// parseMerges reads merges written either as "left right" strings or as [left, right] pairs; a
// merge's rank is its index.
func parseMerges(v gjson.Result, t *Tokenizer) error {
	if !v.IsArray() {
		return errors.New("model.merges is not an array")
	}
	m := &t.model
	m.merges = make(map[uint64]uint64, 1<<16)
	rank := 0
	var err error
	v.ForEach(func(_, item gjson.Result) bool {
		var left, right string
		switch {
		case item.Type == gjson.String:
			parts := strings.Split(item.String(), " ")
			if len(parts) != 2 {
				err = fmt.Errorf("model.merges[%d] %q is not two tokens separated by one space", rank, item.String())
				return false
			}
			left, right = parts[0], parts[1]
		case item.IsArray():
			parts := item.Array()
			if len(parts) != 2 || parts[0].Type != gjson.String || parts[1].Type != gjson.String {
				err = fmt.Errorf("model.merges[%d] %s is not a pair of strings", rank, item.Raw)
				return false
			}
			left, right = parts[0].String(), parts[1].String()
		default:
			err = fmt.Errorf("model.merges[%d] %s is neither a string nor a pair", rank, item.Raw)
			return false
		}
		var ids [3]int
		for i, tok := range [3]string{left, right, left + right} {
			id, ok := t.vocab[tok]
			if !ok {
				err = fmt.Errorf("model.merges[%d] (%q %q): %q is not in the vocabulary", rank, left, right, tok)
				return false
			}
			ids[i] = id
		}
		m.merges[pairKey(int32(ids[0]), int32(ids[1]))] = uint64(rank)<<32 | uint64(uint32(ids[2]))
		rank++
		return true
	})
	return err
}

func parseAddedTokens(v gjson.Result) ([]AddedToken, error) {
	if isNull(v) {
		return nil, nil
	}
	if !v.IsArray() {
		return nil, errors.New("added_tokens is not an array")
	}
	var out []AddedToken
	for i, item := range v.Array() {
		tok, err := parseAddedToken(item, fmt.Sprintf("added_tokens[%d]", i), item.Get("id"))
		if err != nil {
			return nil, err
		}
		out = append(out, tok)
	}
	return out, nil
}

func parseAddedToken(v gjson.Result, path string, idValue gjson.Result) (AddedToken, error) {
	id, ok := jsonID(idValue)
	if !ok {
		return AddedToken{}, fmt.Errorf("%s: id %s is not a non-negative integer", path, idValue.Raw)
	}
	content := v.Get("content")
	if content.Type != gjson.String || content.String() == "" {
		return AddedToken{}, fmt.Errorf("%s: content is missing or empty", path)
	}
	for _, flag := range []string{"lstrip", "rstrip", "single_word"} {
		if v.Get(flag).Bool() {
			return AddedToken{}, fmt.Errorf("%s (%q): %s true is not supported", path, content.String(), flag)
		}
	}
	tok := AddedToken{ID: id, Content: content.String(), Special: v.Get("special").Bool()}
	// As HF's AddedToken::from: special tokens default to being matched in the raw text.
	tok.Normalized = !tok.Special
	if n := v.Get("normalized"); n.Exists() {
		tok.Normalized = n.Bool()
	}
	return tok, nil
}
