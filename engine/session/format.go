package session

import (
	"encoding/binary"
	"hash/crc32"

	"petal/engine/model"
)

// Snapshot file layout, version 1. All integers are little-endian.
//
//	offset  size    field
//	0       8       magic "PETALSNP"
//	8       4       format version (1)
//	12      4       flags (0: no compression; anything else is refused)
//	16      32      model fingerprint
//	48      8       header length H, including the header checksum
//	56      8       payload length P
//	64      4       token count N
//	68      4       layer count L
//	72      4       section count S
//	76      4       zero
//	80      16*S    section table: kind u32, layer u32, element count u64
//	...     4*N     token ids (int32)
//	H-4     4       CRC32C of bytes [0, H-4)
//	H       P       payload: the sections' float32 values, in table order
//	H+P     4       CRC32C of bytes [0, H+P): the whole file
//
// The header has its own checksum so that its lengths (and the token
// history used for prefix matching) are verified before anything is
// allocated from them; the trailing checksum covers the whole file.
const (
	magic         = "PETALSNP"
	formatVersion = 1
	fixedHeader   = 80
	sectionEntry  = 16
	checksumSize  = 4
)

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
	count       uint64 // float32 values
}

// header is the decoded, checksum-verified front of a snapshot.
type header struct {
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
	add := func(kind uint32, layer int, v []float32) {
		if v != nil {
			table = append(table, section{kind, uint32(layer), uint64(len(v))})
			data = append(data, v)
		}
	}
	for i := range d.K {
		add(kindK, i, d.K[i])
		add(kindV, i, d.V[i])
		add(kindConv, i, d.Conv[i])
		add(kindRecur, i, d.Recur[i])
	}
	return table, data
}

// marshalHeader lays out the header of a snapshot, checksum included.
func marshalHeader(fp Fingerprint, tokens []int32, layers int, table []section) []byte {
	headerLen := fixedHeader + sectionEntry*len(table) + 4*len(tokens) + checksumSize
	var payload uint64
	for _, s := range table {
		payload += 4 * s.count
	}
	b := make([]byte, 0, headerLen)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, formatVersion)
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
	}
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}
