package session

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"io"

	"petal/engine/backend"
	"petal/engine/model"
)

// Encode writes d as a snapshot for the model with fingerprint fp, its K
// and V sections in d's KV element type. Float32 slices are written as
// they are, without copies on little-endian hosts; a K or V value that is
// not exact in a 16-bit KV type is refused, not rounded.
func Encode(w io.Writer, fp Fingerprint, d model.StateData) error {
	return encodeVersion(w, formatVersion, fp, d)
}

func encodeVersion(w io.Writer, version uint32, fp Fingerprint, d model.StateData) error {
	if !d.KVType().IsFloat() {
		return fmt.Errorf("session: encode: a KV cache of element type %s", d.KVType())
	}
	if version == 1 && d.KVType() != backend.F32 {
		return fmt.Errorf("session: encode: format version 1 holds f32 sections only, not %s", d.KVType())
	}
	n := len(d.K)
	if len(d.V) != n || len(d.Conv) != n || len(d.Recur) != n {
		return fmt.Errorf("session: encode: state has %d/%d/%d/%d K/V/conv/recurrent layers", len(d.K), len(d.V), len(d.Conv), len(d.Recur))
	}
	table, data := sectionsOf(&d)
	if err := checkLayout(uint64(len(d.Tokens)), uint32(n), table); err != nil {
		return fmt.Errorf("session: encode: %v", err)
	}
	if uint64(len(d.Tokens)) > maxTokens {
		return fmt.Errorf("session: encode: %d tokens exceed the format's limit of %d", len(d.Tokens), maxTokens)
	}
	cw := &crcWriter{w: bufio.NewWriterSize(w, 1<<20)}
	if _, err := cw.Write(marshalHeader(version, fp, d.Tokens, n, table)); err != nil {
		return fmt.Errorf("session: encode: %w", err)
	}
	for i, v := range data {
		s := table[i]
		var err error
		if s.dtype == backend.F32 {
			err = writeFloats(cw, v)
		} else {
			err = writeHalves(cw, v, s.dtype)
		}
		if err != nil {
			return fmt.Errorf("session: encode: layer %d %s state: %w", s.layer, kindName(s.kind), err)
		}
	}
	if _, err := cw.w.Write(appendUint32(nil, cw.sum)); err != nil {
		return fmt.Errorf("session: encode: %w", err)
	}
	if err := cw.w.Flush(); err != nil {
		return fmt.Errorf("session: encode: %w", err)
	}
	return nil
}

// maxTokens is the most tokens a header can count (u32).
const maxTokens = 1<<32 - 1

// crcWriter checksums what passes through it.
type crcWriter struct {
	w   *bufio.Writer
	sum uint32
}

func (c *crcWriter) Write(p []byte) (int, error) {
	c.sum = crc32.Update(c.sum, castagnoli, p)
	return c.w.Write(p)
}
