package metal

import (
	"fmt"
	"slices"

	"petal/engine/backend"
	"petal/engine/metal/dispatch"
)

// A compiled program is one command buffer: each op's dispatches in op
// order, with a barrier before an op only where it conflicts with an op
// since the last barrier (backend.Dependencies over the ops that dispatch
// anything, each op's temporaries counted as a write of the scratch), so
// that independent ops may run concurrently. Every argument is fixed at
// compile time (the position and the tokens are device buffers), so Run
// submits the same commands every time.
type program struct {
	b        *Backend
	ops      []backend.Op
	cmds     []dispatch.Command
	opOf     []int // the op of each command (-1: a barrier between ops)
	stepOf   []int // the op whose dispatches do op i's work: i, or the first op of a fused step
	barriers int
	desc     string // for errors: the op count and the first and last labels
	// scratchNeed is the most temporary memory an op takes: each op's
	// temporaries start at offset 0 of the backend's scratch, and two ops
	// that take some are never left without a barrier between them.
	scratchNeed int64
}

func (p *program) Ops() []backend.Op { return p.ops }

// scratchMem stands for the backend's scratch in the commands of a program
// being compiled; Compile puts the real allocation in its place.
type scratchMem struct{}

func (scratchMem) Size() int64 { return 1 << 62 }

var scratchPlaceholder dispatch.Mem = scratchMem{}

// scratchBuf stands for the scratch in an op's accesses.
type scratchBuf struct{}

func (scratchBuf) Backend() string { return "metal scratch" }

var scratchAccess = backend.Buffer{Mem: scratchBuf{}, Len: 1, Type: backend.F32}

// lowered is one op's dispatches.
type lowered struct {
	cmds    []dispatch.Command
	scratch int64 // bytes of temporaries
	// op stands for the ops a fused step covers in the dependency
	// analysis (nil: the op lowered alone)
	op backend.Op
}

// withScratch is an op whose accesses include a write of the scratch.
type withScratch struct{ backend.Op }

func (o withScratch) Access() (r, w []backend.Buffer) {
	r, w = o.Op.Access()
	return r, append(slices.Clone(w), scratchAccess)
}

// Kernels is the number of dispatches of one Run of a program of this
// backend (0 for another's) (backend.LaunchCounter).
func (b *Backend) Kernels(p backend.Program) int {
	q, ok := p.(*program)
	if !ok || q.b != b {
		return 0
	}
	return len(q.cmds) - q.barriers
}

// Compile lowers every op to dispatches (the decode kernels for one-row
// ops whose shapes they take, the generic ones of ops.metal otherwise)
// after checking its buffers, and places the barriers.
func (b *Backend) Compile(ops []backend.Op) (backend.Program, error) {
	if b.closed {
		return nil, fmt.Errorf("metal: the backend is closed")
	}
	p := &program{b: b, ops: slices.Clone(ops)}
	low := make([]lowered, len(ops))
	p.stepOf = make([]int, len(ops))
	for i := 0; i < len(ops); i++ {
		p.stepOf[i] = i
		if l, n, ok, err := b.lowerFused(p.ops, i); err != nil {
			return nil, fmt.Errorf("metal: op %d (%s): %w", i, backend.LabelOf(ops[i]), err)
		} else if ok {
			low[i] = l
			for j := i + 1; j < i+n; j++ {
				p.stepOf[j] = i // the ops it covers run inside op i's dispatches
			}
			i += n - 1
			continue
		}
		l, err := b.lower(p.ops[i])
		if err != nil {
			return nil, fmt.Errorf("metal: op %d (%s): %w", i, backend.LabelOf(ops[i]), err)
		}
		low[i] = l
	}
	p.place(low)
	p.desc = fmt.Sprintf("of %d ops", len(ops))
	if len(ops) > 0 {
		p.desc = fmt.Sprintf("of %d ops (%s .. %s)", len(ops), backend.LabelOf(ops[0]), backend.LabelOf(ops[len(ops)-1]))
	}
	if p.scratchNeed > 0 {
		m, err := b.grow(&b.scratch, p.scratchNeed)
		if err != nil {
			return nil, err
		}
		for i := range p.cmds {
			for j, a := range p.cmds[i].Buffers {
				if a.Mem == scratchPlaceholder {
					p.cmds[i].Buffers[j].Mem = m
				}
			}
		}
	}
	for i := range p.cmds {
		if err := p.cmds[i].Check(); err != nil {
			return nil, fmt.Errorf("metal: op %d (%s): %w", p.opOf[i], backend.LabelOf(ops[p.opOf[i]]), err)
		}
	}
	return p, nil
}

// place lays the ops' dispatches out in order with the barriers their
// dependencies need: before op i where an op since the last barrier
// conflicts with it. Ops that dispatch nothing (no rows) are left out of
// the analysis: their conflicts would hide others'.
func (p *program) place(low []lowered) {
	var live []int // ops that dispatch something
	var view []backend.Op
	for i, l := range low {
		if len(l.cmds) == 0 {
			continue
		}
		live = append(live, i)
		op := p.ops[i]
		if l.op != nil {
			op = l.op
		}
		if l.scratch > 0 {
			op = withScratch{op}
			p.scratchNeed = max(p.scratchNeed, l.scratch)
		}
		view = append(view, op)
	}
	deps := backend.Dependencies(view)
	since := 0 // the first op (index into live) after the last barrier
	for k, i := range live {
		for _, j := range deps[k] {
			if j >= since {
				p.barrier(-1)
				since = k
				break
			}
		}
		for _, c := range low[i].cmds {
			if c.Barrier {
				p.barrier(i)
				since = k // everything before op i is behind it now
				continue
			}
			p.cmds = append(p.cmds, c)
			p.opOf = append(p.opOf, i)
		}
	}
}

func (p *program) barrier(op int) {
	if n := len(p.cmds); n == 0 || p.cmds[n-1].Barrier {
		return
	}
	p.cmds = append(p.cmds, dispatch.Command{Barrier: true})
	p.opOf = append(p.opOf, op)
	p.barriers++
}

// Run submits the program's command buffer and returns.
func (p *program) Run() error {
	b := p.b
	if b.closed {
		return fmt.Errorf("metal: the backend is closed")
	}
	b.last = p
	if len(p.cmds) == 0 {
		return nil
	}
	if !b.o.SyncEach {
		return b.surfaced(b.d.Submit(p.cmds))
	}
	// one op at a time, waiting after each
	for start := 0; start < len(p.cmds); {
		end := start + 1
		for end < len(p.cmds) && p.opOf[end] == p.opOf[start] {
			end++
		}
		err := b.d.Submit(p.cmds[start:end])
		if err == nil {
			err = b.d.Wait()
		}
		if err != nil {
			op := p.opOf[start]
			label := "a barrier"
			if op >= 0 {
				label = backend.LabelOf(p.ops[op])
			}
			return fmt.Errorf("metal: op %d (%s) of the program %s: %w", op, label, p.desc, err)
		}
		start = end
	}
	return nil
}
