package jobs

import (
	"encoding/json"
	"fmt"
	"math"
)

// Logprob is a natural-log probability. JSON has no infinity, so an
// impossible token (-Inf) or NaN is written as -9999, OpenAI's value for
// "very unlikely".
type Logprob float64

const unlikely = -9999.0

func (l Logprob) MarshalJSON() ([]byte, error) {
	x := float64(l)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		x = unlikely
	}
	return json.Marshal(x)
}

// TokenBytes are a token's UTF-8 bytes, written as an array of integers (as
// OpenAI does) rather than encoding/json's base64; nil is written as null.
type TokenBytes []byte

func (b TokenBytes) MarshalJSON() ([]byte, error) {
	if b == nil {
		return []byte("null"), nil
	}
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	return json.Marshal(ints)
}

func (b *TokenBytes) UnmarshalJSON(data []byte) error {
	var raw []int
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if raw == nil {
		*b = nil
		return nil
	}
	out := make(TokenBytes, len(raw))
	for i, c := range raw {
		if c < 0 || c > 255 {
			return fmt.Errorf("jobs: token byte %d out of range", c)
		}
		out[i] = byte(c)
	}
	*b = out
	return nil
}
