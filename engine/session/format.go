package session

import (
	"encoding/binary"
	"hash/crc32"

	"petal/engine/backend"
	"petal/engine/model"
)

// Snapshot file layout, version 2. All integers are little-endian.
//
//	offset  size    field
//	0       8       magic "PETALSNP"
//	8       4       format version (2)
//	12      4       flags (0: no compression; anything else is refused)
//	16      32      model fingerprint
//	48      8       header length H, including the header checksum
//	56      8       payload length P
//	64      4       token count N
//	68      4       layer count L
//	72      4       section count S
//	76      4       zero
//	80      24*S    section table: kind u32, layer u32, element count u64,
//	                element type u32 (1 f32, 2 bf16, 3 f16), zero u32
//	...     4*N     token ids (int32)
//	H-4     4       CRC32C of bytes [0, H-4)
//	H       P       payload: the sections' values in their element types
//	                (little-endian), in table order
//	H+P     4       CRC32C of bytes [0, H+P): the whole file
//
// K and V sections share one element type, the state's KV cache type; conv
// and recurrent sections are f32. Version 1 is the same but for its 16-byte
// section entries (no element type): every section is f32. It is still
// read.
//
// The header has its own checksum so that its lengths (and the token
// history used for prefix matching) are verified before anything is
// allocated from them; the trailing checksum covers the whole file.
const (
	magic         = "PETALSNP"
	formatVersion = 2
	fixedHeader   = 80
	checksumSize  = 4
)

// entrySize is the length of a section table entry in a format version.
func entrySize(version uint32) int {
	if version == 1 {
		return 16
	}
	return 24
}

// Section kinds: the per-layer slices of model.StateData.
const (
	kindK     uint32 = 1
	kindV     uint32 = 2
	kindConv  uint32 = 3
	kindRecur uint32 = 4
)

var kindNames = map[uint32]string{kindK: "K", kindV: "V", kindConv: "conv", kindRecur: "recurrent"}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// section is one entry of the table.
type section struct {
	kind, layer uint32
	count       uint64        // values
	dtype       backend.DType // their element type
}

// bytes is the length of the section's payload.
func (s section) bytes() uint64 { return s.count * uint64(s.dtype.Size()) }

// header is the decoded, checksum-verified front of a snapshot.
type header struct {
	version     uint32
	fingerprint Fingerprint
	headerLen   uint64
	payloadLen  uint64
	layers      uint32
	sections    []section
	tokens      []int32
}

// sectionsOf lists the non-nil per-layer slices of d, in file order: for
// each layer K and V (full attention) or conv and recurrent (DeltaNet).
func sectionsOf(d *model.StateData) ([]section, [][]float32) {
	var table []section
	var data [][]float32
	add := func(kind uint32, layer int, v []float32, t backend.DType) {
		if v != nil {
			table = append(table, section{kind, uint32(layer), uint64(len(v)), t})
			data = append(data, v)
		}
	}
	kv := d.KVType()
	for i := range d.K {
		add(kindK, i, d.K[i], kv)
		add(kindV, i, d.V[i], kv)
		add(kindConv, i, d.Conv[i], backend.F32)
		add(kindRecur, i, d.Recur[i], backend.F32)
	}
	return table, data
}

// marshalHeader lays out the header of a snapshot in a format version,
// checksum included. (Version 1 is written only by tests, as older petals
// wrote it.)
func marshalHeader(version uint32, fp Fingerprint, tokens []int32, layers int, table []section) []byte {
	entry := entrySize(version)
	headerLen := fixedHeader + entry*len(table) + 4*len(tokens) + checksumSize
	var payload uint64
	for _, s := range table {
		payload += s.bytes()
	}
	b := make([]byte, 0, headerLen)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = append(b, fp[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(headerLen))
	b = binary.LittleEndian.AppendUint64(b, payload)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(tokens)))
	b = binary.LittleEndian.AppendUint32(b, uint32(layers))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(table)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	for _, s := range table {
		b = binary.LittleEndian.AppendUint32(b, s.kind)
		b = binary.LittleEndian.AppendUint32(b, s.layer)
		b = binary.LittleEndian.AppendUint64(b, s.count)
		if version >= 2 {
			b = binary.LittleEndian.AppendUint32(b, uint32(s.dtype))
			b = binary.LittleEndian.AppendUint32(b, 0)
		}
	}
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}
