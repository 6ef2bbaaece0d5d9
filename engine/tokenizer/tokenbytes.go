package tokenizer

// TokenBytes returns the raw bytes a token stands for (which may be part of
// a UTF-8 character), or nil for an unknown id. The slice must not be changed.
func (t *Tokenizer) TokenBytes(id int) []byte { return t.bytesOf(id, false) }
