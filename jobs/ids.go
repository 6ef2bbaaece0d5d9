package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// deriveID hashes the line's identity with a purpose, so that each kind of
// id differs and a rerun of the same input repeats them.
func deriveID(purpose string, o Origin, nbytes int) string {
	h := sha256.New()
	h.Write([]byte(purpose))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(o.Line)))
	h.Write([]byte{0})
	h.Write([]byte(o.CustomID))
	return hex.EncodeToString(h.Sum(nil)[:nbytes])
}

// BatchRequestID is the "id" of an OpenAI Batch output line.
func (o Origin) BatchRequestID() string { return "batch_req_" + deriveID("batch_req", o, 12) }

// RequestID is the "request_id" of an OpenAI Batch output line.
func (o Origin) RequestID() string { return deriveID("request", o, 16) }

// ChatCompletionID is the "id" of a chat.completion body.
func (o Origin) ChatCompletionID() string { return "chatcmpl-" + deriveID("chatcmpl", o, 12) }

// TextCompletionID is the "id" of a text_completion body.
func (o Origin) TextCompletionID() string { return "cmpl-" + deriveID("cmpl", o, 12) }
