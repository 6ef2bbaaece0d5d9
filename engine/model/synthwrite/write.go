// Package synthwrite writes a synthetic model (model.Synthetic's random
// weights, for a shape and seed) as a model folder that engine.Open loads
// like a downloaded MLX 4-bit conversion: config.json with its quantization
// block, safetensors shards with their index, and the embedded tiny model's
// tokenizer, chat template and generation defaults. It is there to time a
// real load (memory maps, model.Load, the backend's uploads) on a machine
// that has no real checkpoint; the weights are Synthetic's, bit for bit.
//
// The folder is written as a hidden sibling and renamed into place when
// complete, so an interrupted write never leaves a folder that looks
// whole. Weights are made and written a layer at a time.
package synthwrite

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"petal/engine/checkpoint"
	"petal/engine/model"
	"petal/engine/tokenizer"
	"petal/fixtures"
)

// DefaultShardBytes is mlx-lm's shard size: a new file once one passes 5 GiB.
const DefaultShardBytes = 5 << 30

// Options of Write.
type Options struct {
	Shape      string // the shape's name, recorded in config.json
	Seed       uint64 // the seed of the weights (model.Synthetic's)
	ShardBytes int64  // most tensor bytes per shard file (0: DefaultShardBytes)
	// Force replaces dir when it is a folder Write filled before; a
	// folder of anything else is never replaced.
	Force bool
	// Progress, when set, is called after every tensor written.
	Progress func(Progress)
}

// Progress of a write.
type Progress struct {
	File           string // the shard being written
	Written, Total int64  // tensor bytes written so far, and in all
}

// markerKey is the config.json key that marks a folder Write made; the
// loader ignores it, Force looks for it.
const markerKey = "petal_synthetic"

// tokenizerFiles are copied from the embedded model. Its ids all lie
// below its 4096-token vocabulary, so any shape with at least that many
// embeddings can encode prompts with it.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"}

// Write writes the synthetic model of cfg's sizes and opt.Seed as a model
// folder dir, which must not exist or be empty (see Options.Force).
func Write(ctx context.Context, dir string, cfg checkpoint.Config, opt Options) (err error) {
	d, err := model.NewDims(&cfg)
	if err != nil {
		return err
	}
	layout, err := model.NewSyntheticLayout(d, opt.Seed)
	if err != nil {
		return err
	}
	if err := checkTokenizerFits(d.Vocab); err != nil {
		return err
	}
	if opt.ShardBytes <= 0 {
		opt.ShardBytes = DefaultShardBytes
	}
	if err := checkDestination(dir, opt.Force); err != nil {
		return err
	}
	plan := planShards(layout, opt.ShardBytes)
	if free, ok := freeBytes(filepath.Dir(filepath.Clean(dir))); ok && free < plan.total+64<<20 {
		return fmt.Errorf("synthwrite: %s: the model takes %.2f GB and %.2f GB are free there", dir, float64(plan.total)/1e9, float64(free)/1e9)
	}

	parent, base := filepath.Split(filepath.Clean(dir))
	if parent == "" {
		parent = "."
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("synthwrite: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".partial-")
	if err != nil {
		return fmt.Errorf("synthwrite: cannot write %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil { // a model folder, not a private temporary one
		return fmt.Errorf("synthwrite: %w", err)
	}
	if err := writeShards(ctx, tmp, layout, plan, opt.Progress); err != nil {
		return err
	}
	if err := writeIndex(tmp, plan); err != nil {
		return err
	}
	for _, name := range tokenizerFiles {
		data, err := fixtures.File(name)
		if err != nil {
			return fmt.Errorf("synthwrite: the embedded model's %s: %w", name, err)
		}
		if err := writeFile(tmp, name, data); err != nil {
			return err
		}
	}
	// config.json last: a folder without it does not open as a model
	conf, err := configJSON(cfg, layout, opt)
	if err != nil {
		return err
	}
	if err := writeFile(tmp, "config.json", conf); err != nil {
		return err
	}
	if err := verify(tmp, cfg); err != nil {
		return err
	}
	return replace(dir, tmp)
}

// checkTokenizerFits refuses a vocabulary smaller than the ids of the
// tokenizer that goes with the folder.
func checkTokenizerFits(vocab int) error {
	data, err := fixtures.File("tokenizer.json")
	if err != nil {
		return fmt.Errorf("synthwrite: the embedded model's tokenizer.json: %w", err)
	}
	tok, err := tokenizer.FromJSON(data)
	if err != nil {
		return err
	}
	if n := tok.VocabSize(); vocab < n {
		return fmt.Errorf("synthwrite: a vocabulary of %d tokens does not hold the %d ids of the tokenizer the folder gets (the embedded model's)", vocab, n)
	}
	return nil
}

// checkDestination accepts a missing path or an empty folder, and with
// force a folder Write filled before.
func checkDestination(dir string, force bool) error {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("synthwrite: %w", err)
	case !info.IsDir():
		return fmt.Errorf("synthwrite: %s exists and is not a folder", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("synthwrite: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	if !force {
		return fmt.Errorf("synthwrite: %s exists and is not empty (--force replaces a synthetic model folder written before)", dir)
	}
	conf, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil || !gjson.GetBytes(conf, markerKey).Exists() {
		return fmt.Errorf("synthwrite: %s is not empty and holds no synthetic model written by petal; not replacing it, even with --force", dir)
	}
	return nil
}

// replace renames the complete folder tmp to dir, moving a folder already
// there aside first and removing it once the new one is in place.
func replace(dir, tmp string) error {
	info, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return renameErr(os.Rename(tmp, dir))
	}
	if err != nil {
		return fmt.Errorf("synthwrite: %w", err)
	}
	if !info.IsDir() {
		return fmt.Errorf("synthwrite: %s exists and is not a folder", dir)
	}
	if err := os.Remove(dir); err == nil { // empty
		return renameErr(os.Rename(tmp, dir))
	}
	parent, base := filepath.Split(filepath.Clean(dir))
	// a fresh name beside it (os.Rename does not replace a folder)
	old, err := os.MkdirTemp(parent, "."+base+".replaced-")
	if err != nil {
		return fmt.Errorf("synthwrite: %w", err)
	}
	os.Remove(old)
	if err := os.Rename(dir, old); err != nil {
		return renameErr(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.Rename(old, dir)
		return renameErr(err)
	}
	return os.RemoveAll(old)
}

func renameErr(err error) error {
	if err != nil {
		return fmt.Errorf("synthwrite: %w", err)
	}
	return nil
}

// shardPlan puts each tensor in a file, in the order the parts make them.
type shardPlan struct {
	files   []shardFile
	byName  map[string]int // tensor name in the file -> index in files
	total   int64          // tensor bytes in all files
	tensors int
}

type shardFile struct {
	name    string
	tensors []model.SyntheticTensor // without values
	bytes   int64
}

// fileName is a tensor's name in the file: the multimodal release's
// namespace, as the mlx-community Qwen3.5/3.6 conversions store it.
func fileName(normalised string) string { return "language_model." + normalised }

// planShards starts a new file when the next tensor would take the current
// one past max bytes, as mlx-lm splits its shards.
func planShards(l *model.SyntheticLayout, max int64) shardPlan {
	p := shardPlan{byName: map[string]int{}}
	var cur shardFile
	for _, part := range l.Parts {
		for _, t := range part.Tensors {
			if len(cur.tensors) > 0 && cur.bytes+t.Bytes() > max {
				p.files = append(p.files, cur)
				cur = shardFile{}
			}
			cur.tensors = append(cur.tensors, t)
			cur.bytes += t.Bytes()
			p.total += t.Bytes()
			p.tensors++
		}
	}
	p.files = append(p.files, cur)
	for i := range p.files {
		p.files[i].name = "model.safetensors"
		if len(p.files) > 1 {
			p.files[i].name = fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(p.files))
		}
		for _, t := range p.files[i].tensors {
			p.byName[fileName(t.Name)] = i
		}
	}
	return p
}

// header is a safetensors header for the file's tensors laid end to end,
// padded with spaces so the data starts 8-byte aligned.
func (f *shardFile) header() ([]byte, error) {
	type entry struct {
		DType       checkpoint.DType `json:"dtype"`
		Shape       []int            `json:"shape"`
		DataOffsets [2]int64         `json:"data_offsets"`
	}
	h := map[string]any{"__metadata__": map[string]string{"format": "mlx"}}
	var off int64
	for _, t := range f.tensors {
		h[fileName(t.Name)] = entry{t.DType, t.Shape, [2]int64{off, off + t.Bytes()}}
		off += t.Bytes()
	}
	js, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("synthwrite: %s header: %w", f.name, err)
	}
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, strings.Repeat(" ", pad)...)
	}
	out := make([]byte, 8, 8+len(js))
	for i := range 8 {
		out[i] = byte(uint64(len(js)) >> (8 * i))
	}
	return append(out, js...), nil
}

// writeShards makes the parts on one goroutine and writes them on this
// one, so the next part is made while the last is written: two parts are
// held at once (one being written, the next made and waiting).
func writeShards(ctx context.Context, dir string, l *model.SyntheticLayout, p shardPlan, progress func(Progress)) error {
	parts := make(chan []model.SyntheticTensor)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(parts)
		for _, ts := range l.Generate() {
			select {
			case parts <- ts:
			case <-stop:
				return
			}
		}
	}()

	w := &shardWriter{dir: dir, plan: &p, current: -1}
	defer w.abort()
	done := 0
	for ts := range parts {
		for i := range ts {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := w.write(&ts[i]); err != nil {
				return err
			}
			done++
			if progress != nil {
				progress(Progress{File: p.files[w.current].name, Written: w.written, Total: p.total})
			}
		}
	}
	if done != p.tensors {
		return fmt.Errorf("synthwrite: %d tensors made for the %d laid out", done, p.tensors)
	}
	return w.finish()
}

// shardWriter writes tensors into the planned files in order.
type shardWriter struct {
	dir     string
	plan    *shardPlan
	current int // index of the open file; -1 before the first
	f       *os.File
	buf     *bufio.Writer
	next    int   // index in the open file's tensors of the next one expected
	written int64 // tensor bytes written in all files
}

func (w *shardWriter) write(t *model.SyntheticTensor) error {
	name := fileName(t.Name)
	i, ok := w.plan.byName[name]
	if !ok {
		return fmt.Errorf("synthwrite: tensor %s was not laid out", t.Name)
	}
	if i != w.current {
		if err := w.finish(); err != nil {
			return err
		}
		if err := w.open(i); err != nil {
			return err
		}
	}
	file := &w.plan.files[w.current]
	if w.next >= len(file.tensors) || fileName(file.tensors[w.next].Name) != name {
		return fmt.Errorf("synthwrite: tensor %s made out of the order of %s", t.Name, file.name)
	}
	if !slices.Equal(file.tensors[w.next].Shape, t.Shape) || file.tensors[w.next].DType != t.DType {
		return fmt.Errorf("synthwrite: tensor %s made as %s %v, laid out as %s %v", t.Name, t.DType, t.Shape, file.tensors[w.next].DType, file.tensors[w.next].Shape)
	}
	n, err := writeValues(w.buf, t)
	if err != nil {
		return fmt.Errorf("synthwrite: writing %s: %w", filepath.Join(w.dir, file.name), err)
	}
	if n != t.Bytes() {
		return fmt.Errorf("synthwrite: tensor %s has %d bytes of values for its %s %v", t.Name, n, t.DType, t.Shape)
	}
	w.next++
	w.written += n
	return nil
}

func (w *shardWriter) open(i int) error {
	file := &w.plan.files[i]
	f, err := os.Create(filepath.Join(w.dir, file.name))
	if err != nil {
		return fmt.Errorf("synthwrite: %w", err)
	}
	w.f, w.buf, w.current, w.next = f, bufio.NewWriterSize(f, 1<<20), i, 0
	h, err := file.header()
	if err == nil {
		_, err = w.buf.Write(h)
	}
	if err != nil {
		return fmt.Errorf("synthwrite: writing %s: %w", f.Name(), err)
	}
	return nil
}

// finish completes the open file: every tensor in it, flushed, on disk.
func (w *shardWriter) finish() error {
	if w.f == nil {
		return nil
	}
	file := &w.plan.files[w.current]
	if w.next != len(file.tensors) {
		return fmt.Errorf("synthwrite: %s has %d of its %d tensors", file.name, w.next, len(file.tensors))
	}
	err := w.buf.Flush()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.f = nil
	if err != nil {
		return fmt.Errorf("synthwrite: writing %s: %w", filepath.Join(w.dir, file.name), err)
	}
	return nil
}

// abort closes a file left open by an error (the folder is removed).
func (w *shardWriter) abort() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}

// writeIndex writes model.safetensors.index.json: the total size and the
// file of every tensor, as mlx-lm writes it.
func writeIndex(dir string, p shardPlan) error {
	index := struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{map[string]int64{"total_size": p.total}, map[string]string{}}
	for name, i := range p.byName {
		index.WeightMap[name] = p.files[i].name
	}
	data, err := json.MarshalIndent(index, "", "    ")
	if err != nil {
		return fmt.Errorf("synthwrite: index: %w", err)
	}
	return writeFile(dir, "model.safetensors.index.json", append(data, '\n'))
}

// writeFile writes a small file of the folder and syncs it.
func writeFile(dir, name string, data []byte) error {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return fmt.Errorf("synthwrite: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("synthwrite: writing %s: %w", f.Name(), err)
	}
	return nil
}

// verify opens the written folder as the loader will and checks that it
// reads back the sizes it was written with.
func verify(dir string, want checkpoint.Config) error {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return fmt.Errorf("synthwrite: the folder written does not open: %w", err)
	}
	defer ck.Close()
	got, err := model.NewDims(&ck.Config)
	if err != nil {
		return fmt.Errorf("synthwrite: the folder written: %w", err)
	}
	wantDims, _ := model.NewDims(&want)
	if fmt.Sprint(got) != fmt.Sprint(wantDims) {
		return fmt.Errorf("synthwrite: the folder written reads back as %+v, not %+v", got, wantDims)
	}
	return nil
}

// Marked reports whether config.json's bytes are those of a folder Write
// made, and the shape and seed it was made with.
func Marked(config []byte) (shape string, seed uint64, ok bool) {
	m := gjson.GetBytes(config, markerKey)
	if !m.IsObject() {
		return "", 0, false
	}
	return m.Get("shape").String(), m.Get("seed").Uint(), true
}
