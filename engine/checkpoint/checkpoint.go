package checkpoint

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// File names inside a checkpoint folder.
const (
	configFile     = "config.json"
	generationFile = "generation_config.json"
	indexFile      = "model.safetensors.index.json"
	singleFile     = "model.safetensors"
)

// Checkpoint is an opened checkpoint folder. Its tensors view memory maps
// that stay valid until Close.
type Checkpoint struct {
	Dir        string
	Config     Config
	Generation Generation

	configJSON []byte // config.json as read
	files      []*File
	tensors    map[string]*Tensor // by normalised name
	original   map[string]string  // normalised name -> name in the file
	names      []string           // sorted normalised names
	ignored    []string           // sorted original names outside the text model
	quant      quantTable

	mu   sync.Mutex
	used map[string]bool
}

// Open reads config.json, generation_config.json (optional) and the
// safetensors shards of dir, and validates them: every tensor lies inside
// its file with the size its dtype and shape imply, the index agrees with
// the shards, and the layout is MLX (not a raw Hugging Face release). The
// shards are memory-mapped read-only.
func Open(dir string) (*Checkpoint, error) { return open(dir, dirSource(dir)) }

// OpenFS opens the checkpoint folder dir of fsys (for instance a model
// embedded in the binary) like Open; its shards are read into memory.
func OpenFS(fsys fs.FS, dir string) (*Checkpoint, error) {
	return open(dir, fsSource{fsys, dir})
}

func open(dir string, src source) (_ *Checkpoint, err error) {
	c := &Checkpoint{Dir: dir, tensors: map[string]*Tensor{}, original: map[string]string{}, used: map[string]bool{}}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	cfg, err := src.readFile(configFile)
	if err != nil {
		return nil, err
	}
	c.configJSON = cfg
	if c.Config, err = parseConfig(cfg); err != nil {
		return nil, err
	}
	if c.quant, err = parseQuantTable(cfg); err != nil {
		return nil, err
	}
	switch gen, err := src.readFile(generationFile); {
	case isNotExist(err):
	case err != nil:
		return nil, err
	default:
		if c.Generation, err = parseGeneration(gen); err != nil {
			return nil, err
		}
	}

	shards, weightMap, err := shardList(dir, src)
	if err != nil {
		return nil, err
	}
	found := map[string]string{} // original name -> shard
	for _, shard := range shards {
		f, err := openFile(shard, shard, src)
		if err != nil {
			return nil, err
		}
		c.files = append(c.files, f)
		for _, t := range f.tensors {
			if err := c.add(shard, t, weightMap, found); err != nil {
				return nil, err
			}
		}
	}
	for name, shard := range weightMap {
		if _, ok := found[name]; !ok {
			return nil, fmt.Errorf("checkpoint: %s maps tensor %q to %s, which does not contain it", indexFile, name, shard)
		}
	}
	for name := range c.tensors {
		c.names = append(c.names, name)
	}
	sort.Strings(c.names)
	sort.Strings(c.ignored)
	if err := c.rejectRawHF(); err != nil {
		return nil, err
	}
	return c, nil
}

// ConfigJSON is config.json's bytes as read; the caller must not modify them.
func (c *Checkpoint) ConfigJSON() []byte { return c.configJSON }

// add files one tensor of a shard under its normalised name, or as ignored.
func (c *Checkpoint) add(shard string, t *Tensor, weightMap, found map[string]string) error {
	if weightMap != nil {
		want, ok := weightMap[t.Name]
		if !ok {
			return fmt.Errorf("checkpoint: tensor %q of %s is not listed in %s", t.Name, shard, indexFile)
		}
		if want != shard {
			return fmt.Errorf("checkpoint: tensor %q is in %s, but %s maps it to %s", t.Name, shard, indexFile, want)
		}
	}
	if prev, dup := found[t.Name]; dup {
		return fmt.Errorf("checkpoint: tensor %q is in both %s and %s", t.Name, prev, shard)
	}
	found[t.Name] = shard
	name, ok := normaliseName(t.Name)
	if !ok {
		c.ignored = append(c.ignored, t.Name)
		return nil
	}
	if prev, dup := c.original[name]; dup {
		return fmt.Errorf("checkpoint: tensors %q and %q are both %q", prev, t.Name, name)
	}
	nt := *t
	nt.Name = name
	c.tensors[name] = &nt
	c.original[name] = t.Name
	return nil
}

// shardList names the safetensors files of dir: the shards of the index
// (with its weight_map), or the single model.safetensors (nil weight_map).
func shardList(dir string, src source) ([]string, map[string]string, error) {
	data, err := src.readFile(indexFile)
	if isNotExist(err) {
		if !src.exists(singleFile) {
			return nil, nil, fmt.Errorf("checkpoint: %s has neither %s nor %s", dir, singleFile, indexFile)
		}
		return []string{singleFile}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(data, &index); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: %s: %v", indexFile, err)
	}
	if len(index.WeightMap) == 0 {
		return nil, nil, fmt.Errorf("checkpoint: %s has no weight_map", indexFile)
	}
	seen := map[string]bool{}
	var shards []string
	for name, shard := range index.WeightMap {
		if seen[shard] {
			continue
		}
		if !fs.ValidPath(shard) || !filepath.IsLocal(shard) {
			return nil, nil, fmt.Errorf("checkpoint: %s maps tensor %q to %q, which is outside the folder", indexFile, name, shard)
		}
		if !src.exists(shard) {
			return nil, nil, fmt.Errorf("checkpoint: %s names shard %s (for tensor %q), which does not exist", indexFile, shard, name)
		}
		seen[shard] = true
		shards = append(shards, shard)
	}
	sort.Strings(shards)
	return shards, index.WeightMap, nil
}

// rejectRawHF refuses a Hugging Face release, recognised by its depthwise
// conv weight stored [C, 1, K] (MLX stores [C, K, 1]). Such a checkpoint
// also needs its zero-centred norms shifted and its fused experts split,
// which petal deliberately leaves to the MLX converter.
func (c *Checkpoint) rejectRawHF() error {
	for _, name := range c.names {
		t := c.tensors[name]
		if !strings.HasSuffix(name, "conv1d.weight") || len(t.Shape) == 0 || t.Shape[len(t.Shape)-1] == 1 {
			continue
		}
		return fmt.Errorf("checkpoint: tensor %q has shape %v, the [C, 1, K] layout of an unconverted Hugging Face checkpoint; "+
			"petal loads MLX 4-bit conversions only (make one with mlx_lm.convert --hf-path <model> -q, or download an mlx-community 4-bit model)",
			c.original[name], t.Shape)
	}
	return nil
}

// Close unmaps every shard; tensors must not be used afterwards.
func (c *Checkpoint) Close() error {
	var first error
	for _, f := range c.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	c.files = nil
	return first
}
