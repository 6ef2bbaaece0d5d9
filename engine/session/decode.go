package session

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"

	"petal/engine/backend"
	"petal/engine/model"
)

// Decode reads a snapshot of size bytes from r and returns its state, its
// KV element type that of the file's K and V sections (version 1 files,
// whose sections are all f32, are read too). It refuses, with a
// *SnapshotError, a file of another format version, one
// written for a model whose fingerprint is not fp, and any file whose
// checksums, lengths or structure do not hold. Nothing is allocated from a
// length that the header checksum has not vouched for, and the total never
// exceeds size; no state is returned unless the whole-file checksum matches.
func Decode(r io.Reader, size int64, fp Fingerprint) (model.StateData, error) {
	h, sum, err := readHeader(r, size)
	if err != nil {
		return model.StateData{}, err
	}
	if h.fingerprint != fp {
		if h.version == 1 {
			// version 1 files were written while the fingerprint sampled
			// only the ends of each tensor, so every one of them differs
			return model.StateData{}, snapErr(ErrOtherModel, "its model fingerprint is %s, this model's is %s: it was written by an older petal, whose fingerprint covered only part of the weights, so it cannot be proven to belong to this model; remove it (petal sessions rm) and start again", h.fingerprint.Short(), fp.Short())
		}
		return model.StateData{}, snapErr(ErrOtherModel, "its model fingerprint is %s, this model's is %s", h.fingerprint.Short(), fp.Short())
	}
	d := model.StateData{
		Tokens: h.tokens,
		KV:     h.kvType(),
		K:      make([][]float32, h.layers), V: make([][]float32, h.layers),
		Conv: make([][]float32, h.layers), Recur: make([][]float32, h.layers),
	}
	update := func(b []byte) { sum = crc32.Update(sum, castagnoli, b) }
	for _, s := range h.sections {
		v := make([]float32, s.count)
		var err error
		if s.dtype == backend.F32 {
			err = readFloats(r, v, update)
		} else {
			err = readHalves(r, v, s.dtype, update)
		}
		if err != nil {
			return model.StateData{}, readErr(err, "reading layer %d %s state", s.layer, kindName(s.kind))
		}
		switch s.kind {
		case kindK:
			d.K[s.layer] = v
		case kindV:
			d.V[s.layer] = v
		case kindConv:
			d.Conv[s.layer] = v
		case kindRecur:
			d.Recur[s.layer] = v
		}
	}
	var trailer [checksumSize]byte
	if _, err := io.ReadFull(r, trailer[:]); err != nil {
		return model.StateData{}, readErr(err, "reading the checksum")
	}
	if got := binary.LittleEndian.Uint32(trailer[:]); got != sum {
		return model.StateData{}, snapErr(ErrCorrupt, "checksum %08x, computed %08x", got, sum)
	}
	return d, nil
}

// readHeader reads and verifies the header of a snapshot of size bytes. It
// returns the running whole-file checksum over the header bytes.
func readHeader(r io.Reader, size int64) (*header, uint32, error) {
	if size < fixedHeader+2*checksumSize {
		return nil, 0, snapErr(ErrTruncated, "%d bytes, fewer than any snapshot", size)
	}
	fixed := make([]byte, fixedHeader)
	if _, err := io.ReadFull(r, fixed); err != nil {
		return nil, 0, readErr(err, "reading the header")
	}
	le := binary.LittleEndian
	if string(fixed[:8]) != magic {
		return nil, 0, snapErr(ErrCorrupt, "it does not start with %q", magic)
	}
	version := le.Uint32(fixed[8:])
	if version != 1 && version != formatVersion {
		return nil, 0, snapErr(ErrVersion, "format version %d, this petal reads versions 1 and %d (a newer petal wrote it)", version, formatVersion)
	}
	if f := le.Uint32(fixed[12:]); f != 0 {
		return nil, 0, snapErr(ErrVersion, "format flags %#x, this petal reads 0", f)
	}
	entry := uint64(entrySize(version))
	h := &header{
		version:    version,
		headerLen:  le.Uint64(fixed[48:]),
		payloadLen: le.Uint64(fixed[56:]),
		layers:     le.Uint32(fixed[68:]),
	}
	copy(h.fingerprint[:], fixed[16:48])
	nTokens, nSections := uint64(le.Uint32(fixed[64:])), uint64(le.Uint32(fixed[72:]))
	want := fixedHeader + entry*nSections + 4*nTokens + checksumSize
	if h.headerLen != want {
		return nil, 0, snapErr(ErrCorrupt, "header length %d, want %d for %d sections and %d tokens", h.headerLen, want, nSections, nTokens)
	}
	if uint64(size) < h.headerLen || uint64(size)-h.headerLen < checksumSize || h.payloadLen != uint64(size)-h.headerLen-checksumSize {
		return nil, 0, snapErr(ErrTruncated, "the header describes %d+%d+%d bytes, the file has %d", h.headerLen, h.payloadLen, checksumSize, size)
	}
	rest := make([]byte, h.headerLen-fixedHeader)
	if _, err := io.ReadFull(r, rest); err != nil {
		return nil, 0, readErr(err, "reading the header")
	}
	body := rest[:len(rest)-checksumSize]
	sum := crc32.Update(crc32.Checksum(fixed, castagnoli), castagnoli, body)
	if got := le.Uint32(rest[len(body):]); got != sum {
		return nil, 0, snapErr(ErrCorrupt, "header checksum %08x, computed %08x", got, sum)
	}
	if le.Uint32(fixed[76:]) != 0 {
		return nil, 0, snapErr(ErrCorrupt, "reserved header field is not zero")
	}
	var payload uint64
	h.sections = make([]section, nSections)
	for i := range h.sections {
		e := body[entry*uint64(i):]
		s := section{kind: le.Uint32(e), layer: le.Uint32(e[4:]), count: le.Uint64(e[8:]), dtype: backend.F32}
		if version >= 2 {
			t, zero := le.Uint32(e[16:]), le.Uint32(e[20:])
			s.dtype = backend.DType(t)
			if t > 255 || !s.dtype.IsFloat() {
				return nil, 0, snapErr(ErrCorrupt, "section %d has element type %d, want 1 (f32), 2 (bf16) or 3 (f16)", i, t)
			}
			if zero != 0 {
				return nil, 0, snapErr(ErrCorrupt, "section %d: reserved field is not zero", i)
			}
		}
		if s.count > h.payloadLen/uint64(s.dtype.Size()) {
			return nil, 0, snapErr(ErrCorrupt, "section %d claims %d values, more than the payload holds", i, s.count)
		}
		payload += s.bytes()
		h.sections[i] = s
	}
	if payload != h.payloadLen {
		return nil, 0, snapErr(ErrCorrupt, "sections add up to %d bytes, the payload is %d", payload, h.payloadLen)
	}
	if err := checkLayout(nTokens, h.layers, h.sections); err != nil {
		return nil, 0, snapErr(ErrCorrupt, "%v", err)
	}
	tok := body[entry*nSections:]
	h.tokens = make([]int32, nTokens)
	for i := range h.tokens {
		h.tokens[i] = int32(le.Uint32(tok[4*i:]))
	}
	sum = crc32.Update(sum, castagnoli, rest[len(body):])
	return h, sum, nil
}

// kvType is the element type of the header's K and V sections (f32 for a
// state without attention layers).
func (h *header) kvType() backend.DType {
	for _, s := range h.sections {
		if s.kind == kindK {
			return s.dtype
		}
	}
	return backend.F32
}

// readErr turns a short read into ErrTruncated and passes other I/O errors
// through.
func readErr(err error, doing string, args ...any) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return snapErr(ErrTruncated, "end of file while "+doing, args...)
	}
	return &ioError{err}
}

// ioError marks a read failure that says nothing about the file's contents.
type ioError struct{ err error }

func (e *ioError) Error() string { return "session: " + e.err.Error() }
func (e *ioError) Unwrap() error { return e.err }
