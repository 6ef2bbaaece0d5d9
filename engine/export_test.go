package engine

// SetDecodeAhead makes the decode loop issue each step before reading the
// last id (or not), whatever the backend.
func SetDecodeAhead(e *Engine, ahead bool) { e.ahead = &ahead }
