// Package oracle reads the reference data that petal is checked against (a
// small model of this architecture with logits, hidden states and greedy
// continuations computed by an independent implementation) and measures how
// far the engine's numbers are from it.
package oracle

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"petal/engine/checkpoint"
)

// Reference is an opened reference folder (shared/oracle/reference).
type Reference struct {
	Dir   string
	index map[string]struct {
		File  string `json:"file"`
		Shape []int  `json:"shape"`
	}
	files map[string]*checkpoint.File
}

// Open opens dir/reference.json and its tensor files.
func Open(dir string) (*Reference, error) {
	data, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		return nil, fmt.Errorf("oracle: %w", err)
	}
	var doc struct {
		Tensors map[string]struct {
			File  string `json:"file"`
			Shape []int  `json:"shape"`
		} `json:"tensors"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("oracle: reference.json: %w", err)
	}
	r := &Reference{Dir: dir, index: doc.Tensors, files: map[string]*checkpoint.File{}}
	for _, t := range doc.Tensors {
		if r.files[t.File] != nil {
			continue
		}
		f, err := checkpoint.OpenFile(filepath.Join(dir, t.File))
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("oracle: %w", err)
		}
		r.files[t.File] = f
	}
	return r, nil
}

// Close unmaps the tensor files.
func (r *Reference) Close() {
	for _, f := range r.files {
		f.Close()
	}
}

func (r *Reference) tensor(name string) (*checkpoint.Tensor, error) {
	e, ok := r.index[name]
	if !ok {
		return nil, fmt.Errorf("oracle: no reference tensor %q", name)
	}
	t, ok := r.files[e.File].Tensor(name)
	if !ok {
		return nil, fmt.Errorf("oracle: %s does not hold %q", e.File, name)
	}
	return t, nil
}

// Floats returns a reference tensor as float32 values and its shape.
func (r *Reference) Floats(name string) ([]float32, []int, error) {
	t, err := r.tensor(name)
	if err != nil {
		return nil, nil, err
	}
	return t.Float32s(), t.Shape, nil
}

// Ints returns a reference tensor of token ids.
func (r *Reference) Ints(name string) ([]int32, error) {
	t, err := r.tensor(name)
	if err != nil {
		return nil, err
	}
	return append([]int32(nil), t.Int32s()...), nil
}

// Sequences are the teacher-forced reference sequences, in the order of the
// nll tensor.
var Sequences = []string{"seq0", "seq1", "seq2", "seq3", "chat"}

// GreedyCases are the greedy-continuation cases.
var GreedyCases = []string{"greedy0", "greedy1", "greedy2"}

// Diff summarises how far got is from want.
type Diff struct {
	RelL2  float64 // ||got-want|| / ||want||
	MaxAbs float64 // max |got-want|
	Worst  int     // index of MaxAbs
}

// Compare measures got against want (same length).
func Compare(got, want []float32) Diff {
	var num, den float64
	d := Diff{Worst: -1}
	for i := range want {
		e := float64(got[i]) - float64(want[i])
		num += e * e
		den += float64(want[i]) * float64(want[i])
		if a := math.Abs(e); a > d.MaxAbs || math.IsNaN(a) {
			d.MaxAbs, d.Worst = a, i
		}
	}
	d.RelL2 = math.Sqrt(num / den)
	if den == 0 {
		d.RelL2 = math.Sqrt(num)
	}
	return d
}

func (d Diff) String() string {
	if d.Worst < 0 {
		return fmt.Sprintf("rel-L2 %.3g, max |Δ| 0", d.RelL2)
	}
	return fmt.Sprintf("rel-L2 %.3g, max |Δ| %.3g at %d", d.RelL2, d.MaxAbs, d.Worst)
}
