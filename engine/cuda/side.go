package cuda

import (
	"fmt"
	"strings"

	"petal/engine/cuda/driver"
)

// sideStream is a second stream that a step forks work onto, so that it
// runs beside the steps after it on the main stream (a CUDA graph captures
// it as a branch), and an event a later step joins it by.
type sideStream struct {
	s          *driver.Stream
	fork, join *driver.Event
}

// open makes the stream and its events the first time they are needed.
func (side *sideStream) open(ctx *driver.Context) error {
	if side.s != nil {
		return nil
	}
	s, err := ctx.NewStream("side")
	if err != nil {
		return err
	}
	fork, err := ctx.NewMarker()
	if err != nil {
		s.Close()
		return err
	}
	join, err := ctx.NewMarker()
	if err != nil {
		fork.Close()
		s.Close()
		return err
	}
	side.s, side.fork, side.join = s, fork, join
	return nil
}

// close waits for the side stream and releases it.
func (side *sideStream) close() error {
	if side.s == nil {
		return nil
	}
	err := side.s.Sync()
	for _, e := range []*driver.Event{side.fork, side.join} {
		if e2 := e.Close(); err == nil {
			err = e2
		}
	}
	if e2 := side.s.Close(); err == nil {
		err = e2
	}
	side.s = nil
	return err
}

// sideSteps is one step that queues steps on the side stream once the main
// stream has reached it, and marks their end for joinSide: their kernels
// run beside whatever the main stream queues after it, which must not touch
// the program's scratch from..to that they use.
func (b *Backend) sideSteps(steps []step, from, to int64) step {
	n, names := 0, make([]string, len(steps))
	for i, st := range steps {
		n += st.kernels
		names[i] = st.name
	}
	return step{kernels: n, name: "side[" + strings.Join(names, "+") + "]", side: true, sideFrom: from, sideTo: to, launch: func(s *driver.Stream) error {
		if err := b.side.open(b.ctx); err != nil {
			return err
		}
		if err := b.side.fork.Record(s); err != nil {
			return err
		}
		if err := b.side.s.WaitEvent(b.side.fork); err != nil {
			return err
		}
		for _, st := range steps {
			if err := st.launch(b.side.s); err != nil {
				return err
			}
		}
		if err := b.side.join.Record(b.side.s); err != nil {
			return err
		}
		if b.o.SyncEach { // sync=op: an error of these kernels named at this step
			return b.side.s.Sync()
		}
		return nil
	}}
}

// joinSide is st waiting, on the main stream, for the steps the last
// sideSteps queued.
func (b *Backend) joinSide(st step) step {
	launch := st.launch
	st.launch = func(s *driver.Stream) error {
		if b.side.join == nil {
			return fmt.Errorf("cuda: %s joins a side stream no step forked", st.name)
		}
		if err := s.WaitEvent(b.side.join); err != nil {
			return err
		}
		return launch(s)
	}
	return st
}
