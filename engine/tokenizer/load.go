package tokenizer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tidwall/gjson"
)

// Load reads dir/tokenizer.json and, when it exists, dir/tokenizer_config.json (for eos_token and
// a consistency check of added_tokens_decoder).
func Load(dir string) (*Tokenizer, error) {
	path := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	d, err := parseTokenizerJSON(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	cfg, err := os.ReadFile(cfgPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("tokenizer: %w", err)
	default:
		if err := d.applyConfig(cfg); err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", cfgPath, err)
		}
	}
	t, err := d.build()
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	if d.eos != "" {
		id, ok := t.ID(d.eos)
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s: eos_token %q is not a token", cfgPath, d.eos)
		}
		t.eosID, t.eosPresent = id, true
	}
	return t, nil
}

// FromJSON builds a tokenizer from the contents of a tokenizer.json file.
func FromJSON(data []byte) (*Tokenizer, error) {
	d, err := parseTokenizerJSON(data)
	if err == nil {
		var t *Tokenizer
		if t, err = d.build(); err == nil {
			return t, nil
		}
	}
	return nil, fmt.Errorf("tokenizer: %w", err)
}

// draft holds what tokenizer.json (and tokenizer_config.json) say, before the tables are built.
type draft struct {
	t     *Tokenizer
	added []AddedToken
	eos   string
}

func parseTokenizerJSON(data []byte) (*draft, error) {
	if !gjson.ValidBytes(data) {
		return nil, errors.New("not valid JSON")
	}
	// One string conversion; every gjson result below is a substring of it.
	root := gjson.Parse(string(data))
	t := &Tokenizer{}
	var err error
	if t.normalizers, err = parseNormalizer(root.Get("normalizer"), "normalizer"); err != nil {
		return nil, err
	}
	if t.pre, err = parsePreTokenizer(root.Get("pre_tokenizer")); err != nil {
		return nil, err
	}
	if err := checkDecoder(root.Get("decoder")); err != nil {
		return nil, err
	}
	if err := parseModel(root.Get("model"), t); err != nil {
		return nil, err
	}
	added, err := parseAddedTokens(root.Get("added_tokens"))
	if err != nil {
		return nil, err
	}
	// truncation, padding and post_processor only matter for batches and for adding special
	// tokens on request, which Encode never does.
	return &draft{t: t, added: added}, nil
}

func checkDecoder(v gjson.Result) error {
	if !v.Exists() || v.Type == gjson.Null {
		return errors.New(`decoder is missing (want "ByteLevel")`)
	}
	if typ := v.Get("type").String(); typ != "ByteLevel" {
		return fmt.Errorf(`decoder.type %q is not supported (want "ByteLevel")`, typ)
	}
	return nil
}

// applyConfig reads eos_token and checks added_tokens_decoder against tokenizer.json; tokens it
// lists that tokenizer.json lacks are added, as transformers does.
func (d *draft) applyConfig(data []byte) error {
	if !gjson.ValidBytes(data) {
		return errors.New("not valid JSON")
	}
	root := gjson.ParseBytes(data)
	eos := root.Get("eos_token")
	if eos.IsObject() {
		eos = eos.Get("content")
	}
	if eos.Type == gjson.String {
		d.eos = eos.String()
	}
	var err error
	root.Get("added_tokens_decoder").ForEach(func(key, v gjson.Result) bool {
		path := fmt.Sprintf("added_tokens_decoder[%s]", key.String())
		var tok AddedToken
		if tok, err = parseAddedToken(v, path, gjson.Parse(key.String())); err != nil {
			return false
		}
		err = d.mergeAdded(tok, path)
		return err == nil
	})
	return err
}

func (d *draft) mergeAdded(tok AddedToken, path string) error {
	for _, have := range d.added {
		if have.ID != tok.ID {
			continue
		}
		if have.Content != tok.Content || have.Special != tok.Special {
			return fmt.Errorf("%s (%q, special %v) disagrees with tokenizer.json (%q, special %v)",
				path, tok.Content, tok.Special, have.Content, have.Special)
		}
		return nil
	}
	d.added = append(d.added, tok)
	return nil
}
