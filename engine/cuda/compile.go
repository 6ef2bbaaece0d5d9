package cuda

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"petal/engine/backend"
	"petal/engine/cuda/driver"
)

// A compiled program is a list of kernel launches, each with its op. With
// graphs on, the list is captured once as a CUDA graph and Run replays it:
// every argument is fixed at compile time (the position and the tokens are
// device buffers), so one graph serves every step of a decode.
type program struct {
	b       *Backend
	ops     []backend.Op
	steps   []step
	kernels int
	exec    *driver.GraphExec
	// graph: the program is captured as a CUDA graph on its second Run
	// (runs counts them). A prompt's chunk of a length not seen before
	// runs once, and capturing it then cost more than replaying saves: on
	// the H200 a first prefill of 256, 512, 1K and 4K tokens took 54, 57,
	// 79 and 187 ms captured at compile, 45, 52, 70 and 181 ms captured on
	// the second run (docs/bench/cuda/2026-12-01-ttft1). Only programs of
	// at most graphMaxRows rows are captured at all (graphMaxRows).
	graph bool
	runs  int
	desc  string // for errors: the op count and the first and last labels

	// Temporaries: each op's start at offset 0 of the backend's scratch
	// (ops run one after another on one stream); the address is fixed
	// when the program is compiled.
	scratchNeed, zerosNeed int64
	scratch, zeros         driver.Ptr
	constBytes             []byte          // tables the kernels read, uploaded once
	consts                 driver.Ptr      // their device copy (held until the backend closes)
	events                 []*driver.Event // ProfiledRun's, made on first use
	writes                 []span          // the bytes its ops may write
	done                   *driver.Event   // recorded after each Run (readback.go)
	// combine: an MoE block's combine left to the norm after it
	// (combinenorm=on), until that norm's lowering takes it (prefill.go)
	combine *combineIn
}

// step launches some kernels of op ops[op] on s.
type step struct {
	op      int
	kernels int
	name    string // the kernels, for tests and traces
	launch  func(s *driver.Stream) error
	early   bool // under pdl=some: launched with programmatic serialization
	side    bool // forks work onto the side stream (sideSteps)
	// under side, the program's scratch the forked work uses, [from, to)
	sideFrom, sideTo int64
}

func (p *program) Ops() []backend.Op { return p.ops }

// kernelNames lists the kernels of each op of p, in order.
func (p *program) kernelNames() [][]string {
	names := make([][]string, len(p.ops))
	for _, st := range p.steps {
		names[st.op] = append(names[st.op], st.name)
	}
	return names
}

// Kernels is the number of kernel launches of a program of this backend
// (0 for another's): a measure of what a decode step costs in latency.
func (b *Backend) Kernels(p backend.Program) int {
	if q, ok := p.(*program); ok && q.b == b {
		return q.kernels
	}
	return 0
}

// Compile lowers every op to kernels (the decode kernels for one-row ops
// whose shapes they take, the plain ones of ops.cu otherwise) after
// checking its buffers, and captures the launches as a graph.
func (b *Backend) Compile(ops []backend.Op) (backend.Program, error) {
	start := time.Now()
	p := &program{b: b, ops: slices.Clone(ops)}
	var byKind map[string]time.Duration // verbose=on: the lowering's time by the kind of op
	if b.o.Verbose {
		byKind = map[string]time.Duration{}
	}
	for i := 0; i < len(p.ops); i++ {
		op := p.ops[i]
		var opStart time.Time
		if byKind != nil {
			opStart = time.Now()
		}
		var steps []step
		var err error
		// an MoE combine the op before left to this one's norm; one from a
		// lowering that was tried and not kept (its op not the one before)
		// goes
		left := p.combine
		if left != nil && left.expertsAt != i-1 {
			left, p.combine = nil, nil
		}
		fused := 0 // the ops after this one that its steps run too
		if st, ok := b.normLinearsSteps(p, i); ok {
			for _, s := range st { // the linears' op, and under convgemm=on the ConvSiLU's after it
				fused = max(fused, s.op)
			}
		} else if st, ok := b.normMoESteps(p, i); ok {
			steps, fused = st, 2
		} else if st, ok := b.gdnStep(p, i); ok {
			steps = []step{st}
		} else if st, ok := b.moeLayerStep(p, i); ok {
			steps = []step{st}
		} else if st, ok := b.normRouteStep(p, i); ok {
			steps = []step{st}
		} else if st, ok := b.normGroupStep(p, i); ok {
			steps = []step{st}
		} else {
			steps, err = b.lower(p, op)
		}
		if err != nil {
			return nil, fmt.Errorf("cuda: op %d (%s): %w", i, backend.LabelOf(op), err)
		}
		if left != nil {
			p.combine = nil
			if !left.taken { // this op's lowering did not sum it: the combine runs first, as it would have
				st := left.step
				st.op = -1
				steps = append([]step{st}, steps...)
			}
		}
		for _, s := range steps {
			s.op += i // relative to op i where a fused lowering says so
			s.early = b.o.PDL && b.o.PDLSome && pdlGainer(s.name)
			p.steps = append(p.steps, s)
			p.kernels += s.kernels
		}
		if byKind != nil {
			byKind[op.Name()] += time.Since(opStart)
		}
		i += fused
		if len(steps) == 1 && (steps[0].name == gdnKernel || steps[0].name == moeLayerKernel) {
			i += 2 // the step runs the two ops after this one too
		}
		if len(steps) == 1 && (steps[0].name == normRouteKernel || steps[0].name == normGroupKernel) {
			i++ // the step runs the op after this AddRMSNorm too
		}
	}
	p.desc = fmt.Sprintf("of %d ops", len(ops))
	if len(ops) > 0 {
		p.desc = fmt.Sprintf("of %d ops (%s .. %s)", len(ops), backend.LabelOf(ops[0]), backend.LabelOf(ops[len(ops)-1]))
	}
	lowered := time.Since(start)
	var err error
	if p.scratchNeed > 0 {
		if p.scratch, err = b.grow(&b.scratch, p.scratchNeed, "scratch"); err != nil {
			return nil, err
		}
	}
	if p.zerosNeed > 0 {
		if p.zeros, err = b.grow(&b.zeros, p.zerosNeed, "zeros"); err != nil {
			return nil, err
		}
	}
	if len(p.constBytes) > 0 {
		if p.consts, err = b.alloc(int64(len(p.constBytes)), "program tables"); err != nil {
			return nil, err
		}
		b.held = append(b.held, p.consts)
		if err := b.s.CopyToDevice(p.consts, p.constBytes); err != nil {
			return nil, err
		}
	}
	p.graph = b.o.Graphs && !b.o.SyncEach && len(p.steps) > 0 && chunkRows(p.ops) <= graphMaxRows
	p.writes = writes(p.ops)
	if p.done, err = b.ctx.NewMarker(); err != nil {
		return nil, err
	}
	// programs come and go (a state's grown caches make new ones): the
	// marker goes with its program (the read-back queue keeps a program it
	// may wait for alive)
	runtime.AddCleanup(p, func(e *driver.Event) { e.Close() }, p.done)
	if b.o.Verbose {
		how := "launched one by one"
		if p.graph {
			how = "one CUDA graph from its second run"
		}
		// the host's time: lowering the ops, then the scratch, tables
		// and marker (device allocations where they grow)
		fmt.Fprintf(os.Stderr, "cuda: compiled a program %s into %d kernels, %s, in %.2f ms (lowering %.2f%s, memory %.2f)\n",
			p.desc, p.kernels, how, ms(time.Since(start)), ms(lowered), slowestKinds(byKind, 3), ms(time.Since(start)-lowered))
	}
	return p, nil
}

// slowestKinds is ": KIND ms, ..." for the n op kinds whose lowering took
// longest (a fused step's time goes to its first op's kind), for the
// verbose line.
func slowestKinds(byKind map[string]time.Duration, n int) string {
	kinds := slices.SortedFunc(maps.Keys(byKind), func(a, b string) int { return cmp.Compare(byKind[b], byKind[a]) })
	var out []string
	for _, k := range kinds[:min(n, len(kinds))] {
		out = append(out, fmt.Sprintf("%s %.2f", k, ms(byKind[k])))
	}
	if len(out) == 0 {
		return ""
	}
	return ": " + strings.Join(out, ", ")
}

// graphMaxRows is the most rows (a chunk's tokens) of a program captured
// as a CUDA graph. Above it the kernels are long enough that launching
// them one by one costs the GPU nothing, and capturing costs the host
// 9-12 ms: on an H100, prompts of 64 / 256 / 512 / 1K / 4K tokens replayed
// in 17.67 / 22.7 / 26.7 / 36.55 / 102.45 ms against 17.82-17.87 / 22.95
// / 26.7 / 36.75 / 102.5 run launch by launch, and their captured second
// runs took 29.7 / 31.6 / 37.7 / 48.2 / 112.8 ms; 16 tokens 11.70
// replayed, 11.77-11.87 launched, its capture free
// (docs/bench/cuda/2026-12-07-compile1).
const graphMaxRows = 16

// chunkRows is the most rows an op of ops works on: a prompt chunk's
// tokens, 1 for a decode step, 0 for ops without rows (a sampler's); an op
// it does not know counts as a long chunk's (no graph) until it is named
// here.
func chunkRows(ops []backend.Op) int {
	rows := 0
	for _, op := range ops {
		n := 0
		switch o := op.(type) {
		case *backend.Embed:
			n = o.Rows
		case *backend.AddRMSNorm:
			n = o.Rows
		case *backend.QLinear:
			n = o.Rows
		case *backend.QLinearGroup:
			n = o.Rows
		case *backend.ConvSiLU:
			n = o.Rows
		case *backend.DeltaRule:
			n = o.Rows
		case *backend.GatedRMSNorm:
			n = o.Rows
		case *backend.QKPrep:
			n = o.Rows
		case *backend.Attention:
			n = o.Rows
		case *backend.Route:
			n = o.Rows
		case *backend.Experts:
			n = o.Rows
		case *backend.Advance, *backend.Sample, *backend.Logprobs:
		default:
			n = math.MaxInt
		}
		rows = max(rows, n)
	}
	return rows
}

// capture records the launches into a graph and instantiates it.
func (p *program) capture() error {
	s := p.b.s
	if err := s.BeginCapture(); err != nil {
		return err
	}
	for _, st := range p.steps {
		if err := p.b.launchStep(s, st); err != nil {
			if g, e := s.EndCapture(); e == nil {
				g.Close()
			}
			return fmt.Errorf("cuda: capturing %s: %w", backend.LabelOf(p.ops[st.op]), err)
		}
	}
	g, err := s.EndCapture()
	if err != nil {
		return err
	}
	exec, err := g.Instantiate()
	g.Close()
	if err != nil {
		return err
	}
	p.exec = exec
	// A program is dropped without a call (a state's grown caches make new
	// ones): release its graph when it is collected.
	runtime.AddCleanup(p, func(x *driver.GraphExec) { x.Close() }, exec)
	return nil
}

// launchStep queues a step's kernels on s, programmatic where Options
// say (under pdl=some, the steps marked early).
func (b *Backend) launchStep(s *driver.Stream, st step) error {
	if b.o.PDL && b.o.PDLSome {
		s.SetProgrammatic(st.early)
		defer s.SetProgrammatic(false) // launches outside programs stay plain
	}
	return st.launch(s)
}

// pdlGainer says whether pdl=some launches the step of this name early.
func pdlGainer(name string) bool {
	for _, k := range pdlGainers {
		if strings.HasPrefix(name, k) {
			return true
		}
	}
	return false
}

// Run queues the program and returns.
func (p *program) Run() error {
	b := p.b
	if b.ctx == nil {
		return fmt.Errorf("cuda: the backend is closed")
	}
	b.last = p
	p.runs++
	if p.exec == nil && p.graph && p.runs >= 2 {
		if err := p.capture(); err != nil {
			return err
		}
	}
	// until its marker is recorded, a read of what it writes waits for all
	b.rb.queued(p.writes, nil)
	if p.exec != nil {
		if err := p.exec.Launch(b.s); err != nil {
			return b.surfaced(err)
		}
	} else {
		for _, st := range p.steps {
			if err := b.launchStep(b.s, st); err != nil {
				return fmt.Errorf("cuda: %s: %w", backend.LabelOf(p.ops[st.op]), b.surfaced(err))
			}
			if b.o.SyncEach {
				if err := b.s.Sync(); err != nil {
					return fmt.Errorf("cuda: op %d (%s) of the program %s: %w", st.op, backend.LabelOf(p.ops[st.op]), p.desc, err)
				}
			}
		}
	}
	if err := p.done.Record(b.s); err != nil {
		return b.surfaced(err)
	}
	b.rb.queue[len(b.rb.queue)-1].marked = p
	return nil
}

// ProfiledRun runs a program of this backend op by op between events and
// adds each op's device time to times (backend.Profiler). The kernels run
// unfused by graphs, so the sum is a little above a replayed run's time;
// the time of a Gated DeltaNet step fused into one kernel (gdnStep) goes
// to its first op, the conv.
func (b *Backend) ProfiledRun(p backend.Program, times []time.Duration) error {
	prog, ok := p.(*program)
	if !ok || prog.b != b {
		return fmt.Errorf("cuda: profiling a program of another backend")
	}
	if len(times) != len(prog.ops) {
		return fmt.Errorf("cuda: %d times for a program of %d ops", len(times), len(prog.ops))
	}
	n := len(prog.ops)
	for len(prog.events) < n+1 {
		ev, err := b.ctx.NewEvent()
		if err != nil {
			return err
		}
		prog.events = append(prog.events, ev)
	}
	b.last = prog
	b.rb.queued(prog.writes, nil) // settled by the Sync below
	at := 0
	for i := range n {
		if err := prog.events[i].Record(b.s); err != nil {
			return err
		}
		for ; at < len(prog.steps) && prog.steps[at].op == i; at++ {
			if err := b.launchStep(b.s, prog.steps[at]); err != nil {
				return fmt.Errorf("cuda: %s: %w", backend.LabelOf(prog.ops[i]), err)
			}
		}
	}
	if err := prog.events[n].Record(b.s); err != nil {
		return err
	}
	if err := b.Sync(); err != nil {
		return err
	}
	for i := range n {
		d, err := driver.Elapsed(prog.events[i], prog.events[i+1])
		if err != nil {
			return err
		}
		times[i] += d
	}
	return nil
}

// reserve claims n bytes of the op's scratch (256-byte aligned) and
// returns their offset; off is the op's running total.
func (p *program) reserve(off *int64, n int64) int64 {
	at := (*off + 255) &^ 255
	*off = at + n
	p.scratchNeed = max(p.scratchNeed, *off)
	return at
}

// constant adds data to the program's tables and returns its offset there
// (256-byte aligned).
func (p *program) constant(data []byte) int64 {
	at := (len(p.constBytes) + 255) &^ 255
	p.constBytes = append(p.constBytes, make([]byte, at-len(p.constBytes))...)
	p.constBytes = append(p.constBytes, data...)
	return int64(at)
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }
