package checkpoint

import (
	"path/filepath"
)

// File is one memory-mapped safetensors file: a checkpoint shard, or a file
// of reference tensors read by tests. Tensor names are the file's own.
type File struct {
	Path     string
	Metadata map[string]string // the header's __metadata__ strings (MLX: format=mlx)

	tensors []*Tensor // sorted by name
	byName  map[string]*Tensor
	data    []byte  // the whole file
	mapped  bool    // data is a memory map (whole pages), not a copy
	id      *fileID // nil for a file read from an fs.FS
	unmap   func() error
}

// OpenFile maps and validates one safetensors file.
func OpenFile(path string) (*File, error) {
	return openFile(path, filepath.Base(path), dirSource(""))
}

// openFile opens name from src; label names the file in errors and tensors.
func openFile(name, label string, src source) (*File, error) {
	data, id, unmap, err := src.mapFile(name)
	if err != nil {
		return nil, err
	}
	tensors, meta, err := parseHeader(label, data)
	if err != nil {
		unmap()
		return nil, err
	}
	f := &File{Path: name, Metadata: meta, tensors: tensors, byName: make(map[string]*Tensor, len(tensors)), data: data, mapped: src.mapped() && len(data) > 0, id: id, unmap: unmap}
	for _, t := range tensors {
		f.byName[t.Name] = t
	}
	return f, nil
}

// Tensor returns the tensor with the given name.
func (f *File) Tensor(name string) (*Tensor, bool) {
	t, ok := f.byName[name]
	return t, ok
}

// Names lists the tensor names in sorted order.
func (f *File) Names() []string {
	names := make([]string, len(f.tensors))
	for i, t := range f.tensors {
		names[i] = t.Name
	}
	return names
}

// Close unmaps the file; its tensors must not be used afterwards.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap = nil
	f.tensors, f.byName, f.data, f.mapped = nil, nil, nil, false
	return err
}
