package driver

import (
	"fmt"
	"runtime"
	"sync"
)

// Uploader copies large host data (weights from a memory-mapped checkpoint)
// to the device through two pinned staging buffers: while the device copies
// one chunk, the host fills the other. Pageable copies run at a fraction of
// the bus speed; this runs near pinned speed without pinning the source.
type Uploader struct {
	s    *Stream
	bufs [2]*HostBuffer
	done [2]*Event
	used [2]bool
}

// NewUploader makes an uploader on s with two staging buffers of chunk bytes.
func (c *Context) NewUploader(s *Stream, chunk int64) (*Uploader, error) {
	if chunk <= 0 {
		return nil, fmt.Errorf("cuda: uploader with %d-byte chunks", chunk)
	}
	u := &Uploader{s: s}
	for i := range u.bufs {
		var err error
		if u.bufs[i], err = c.AllocHost(chunk, "upload staging"); err != nil {
			u.Close()
			return nil, err
		}
		if u.done[i], err = c.NewEvent(); err != nil {
			u.Close()
			return nil, err
		}
	}
	return u, nil
}

// Upload copies src to dst. It returns when every chunk is queued; src may
// be reused at once (the data is in staging), and the stream's next work
// sees dst complete.
func (u *Uploader) Upload(dst Ptr, src []byte) error {
	chunk := len(u.bufs[0].Bytes)
	for k, off := 0, 0; off < len(src); k, off = k+1, off+chunk {
		i := k % 2
		if u.used[i] {
			if err := u.done[i].Sync(); err != nil {
				return err
			}
		}
		n := min(chunk, len(src)-off)
		parallelCopy(u.bufs[i].Bytes[:n], src[off:off+n])
		if err := u.s.CopyToDevice(dst.Add(int64(off)), u.bufs[i].Bytes[:n]); err != nil {
			return err
		}
		if err := u.done[i].Record(u.s); err != nil {
			return err
		}
		u.used[i] = true
	}
	return nil
}

// Close waits for queued copies and frees the staging buffers.
func (u *Uploader) Close() error {
	var first error
	for i := range u.bufs {
		if u.done[i] != nil {
			if u.used[i] {
				if err := u.done[i].Sync(); err != nil && first == nil {
					first = err
				}
			}
			if err := u.done[i].Close(); err != nil && first == nil {
				first = err
			}
		}
		if u.bufs[i] != nil {
			if err := u.bufs[i].Free(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// parallelCopy copies src into dst (of equal length) on several cores: one
// core's copy into pinned memory is slower than the bus.
func parallelCopy(dst, src []byte) {
	const minPiece = 1 << 20
	workers := min(runtime.GOMAXPROCS(0), max(1, len(src)/minPiece))
	if workers == 1 {
		copy(dst, src)
		return
	}
	piece := (len(src) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(src); lo += piece {
		hi := min(lo+piece, len(src))
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(dst[lo:hi], src[lo:hi])
		}()
	}
	wg.Wait()
}
