// Package engine is petal's model-independent runtime: it opens a model
// folder (weights, tokenizer, chat template, generation defaults) on a
// backend and runs generation over a sequence state with sampling, stop
// handling and per-request timing.
package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"petal/engine/backend"
	"petal/engine/chat"
	"petal/engine/checkpoint"
	"petal/engine/model"
	"petal/engine/tokenizer"

	"github.com/tidwall/gjson"
)

// Options choose how a model is opened.
type Options struct {
	Backend      backend.Backend
	Chunk        int    // prefill chunk size (tokens per pass)
	MaxContext   int    // tokens per sequence; 0 means the model's max_position_embeddings; given, the KV cache is sized for it up front
	ChatTemplate string // a template file overriding the model's own; "" for the model's
}

// Engine is an opened model.
type Engine struct {
	Dir        string
	Checkpoint *checkpoint.Checkpoint
	Model      *model.Model
	Tokenizer  *tokenizer.Tokenizer
	Template   *chat.Template // nil when the folder has no chat template
	StopIDs    map[int32]bool // end-of-sequence ids: generation stops without emitting them
	MaxContext int
	LoadTime   time.Duration

	ahead  *bool        // the decode loop's choice to issue steps ahead; nil: the backend's (tests set it)
	unwrap func() error // lets the backend go of the checkpoint's maps (mapRegions); before they are unmapped
}

// Open loads the model folder dir.
func Open(dir string, opt Options) (*Engine, error) {
	start := time.Now()
	if opt.Chunk <= 0 {
		opt.Chunk = backend.DefaultChunk(opt.Backend)
	}
	if opt.MaxContext > 0 && opt.Chunk > opt.MaxContext {
		// a pass never holds more tokens than a sequence can: the buffers
		// sized by the chunk (a scoring pass's logits) need no more rows
		opt.Chunk = opt.MaxContext
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	e := &Engine{Dir: dir, Checkpoint: ck, StopIDs: map[int32]bool{}}
	if e.unwrap, err = mapRegions(opt.Backend, ck); err != nil {
		ck.Close()
		return nil, err
	}
	if e.Model, err = model.Load(ck, opt.Backend, opt.Chunk); err != nil {
		e.Close()
		return nil, err
	}
	if e.Tokenizer, err = tokenizer.Load(dir); err != nil {
		e.Close()
		return nil, err
	}
	m, tok := e.Model, e.Tokenizer
	if e.Template, err = loadTemplate(dir, opt.ChatTemplate); err != nil {
		e.Close()
		return nil, err
	}
	// stop on generation_config's eos list, else config's, else the tokenizer's
	eos := ck.Generation.EOSTokenIDs
	if len(eos) == 0 {
		eos = ck.Config.EOSTokenIDs
	}
	for _, id := range eos {
		e.StopIDs[int32(id)] = true
	}
	if id, ok := tok.EOS(); ok {
		e.StopIDs[int32(id)] = true
	}
	e.MaxContext = opt.MaxContext
	// a context the user chose is allocated at once, so the cache never
	// grows and the compiled programs over it last (model.FullKV)
	m.FullKV = opt.MaxContext > 0
	if e.MaxContext <= 0 {
		e.MaxContext = ck.Config.MaxPositionEmbeddings
	}
	if e.MaxContext <= 0 {
		e.MaxContext = 32768
	}
	e.LoadTime = time.Since(start)
	return e, nil
}

func loadTemplate(dir, override string) (*chat.Template, error) {
	if override != "" {
		t, err := chat.LoadTemplateFile(override)
		if err != nil {
			return nil, err
		}
		special, err := chat.ReadSpecialTokens(dir)
		if err != nil {
			return nil, err
		}
		return t.WithSpecialTokens(special), nil
	}
	if !hasTemplate(dir) {
		return nil, nil // a base model without a template: plain completion only
	}
	return chat.LoadTemplate(dir)
}

func hasTemplate(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "chat_template.jinja")); err == nil {
		return true
	}
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	return err == nil && gjson.GetBytes(data, "chat_template").Exists()
}

// mapRegions hands the checkpoint's memory maps to a backend that binds
// weights in place (backend.RegionMapper), before any matrix is uploaded;
// the function returned lets the backend go of them.
func mapRegions(be backend.Backend, ck *checkpoint.Checkpoint) (func() error, error) {
	rm, ok := be.(backend.RegionMapper)
	if !ok {
		return nil, nil
	}
	var regions []backend.MappedRegion
	for _, m := range ck.Mappings() {
		regions = append(regions, backend.MappedRegion{Name: m.File, Data: m.Data, Largest: m.Largest})
	}
	if len(regions) == 0 {
		return nil, nil
	}
	return rm.MapRegions(regions)
}

// Close releases the memory map, after the backend has let go of it.
func (e *Engine) Close() error {
	var err error
	if e.unwrap != nil {
		err = e.unwrap()
		e.unwrap = nil
	}
	if cerr := e.Checkpoint.Close(); err == nil {
		err = cerr
	}
	return err
}

// NewState starts an empty sequence.
func (e *Engine) NewState() *model.State { return e.Model.NewState(e.MaxContext) }

// Encode tokenises text as int32 ids.
func (e *Engine) Encode(text string) []int32 {
	ids := e.Tokenizer.Encode(text)
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

// RenderChat applies the chat template to a request object
// {"messages": [...], "tools": [...], "add_generation_prompt": true, ...}.
func (e *Engine) RenderChat(req []byte) (string, error) {
	if e.Template == nil {
		return "", fmt.Errorf("engine: %s has no chat template (chat_template.jinja or tokenizer_config.json); use plain completion or --chat-template", e.Dir)
	}
	return e.Template.Render(req)
}
