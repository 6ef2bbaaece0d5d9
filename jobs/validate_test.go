package jobs

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestCheckParamsIsTheLineCheck: CheckParams refuses and accepts what a
// job line's body does, naming the same field.
func TestCheckParamsIsTheLineCheck(t *testing.T) {
	for _, opt := range []map[string]any{
		{"temperature": 5}, {"top_p": 2}, {"max_tokens": 0}, {"stop": []string{""}}, {"stop": []string{"a", ""}},
		{"min_p": -1}, {"top_k": -2}, {"repetition_penalty": 0}, {"temperature": 0.5, "top_p": 0.9, "stop": []string{"x"}, "max_tokens": 3},
	} {
		_, perr := CheckParams(Completion, opt)
		line := fmt.Sprintf(`{"prompt": "x", %s}`, mustJSON(opt)[1:len(mustJSON(opt))-1])
		_, lerr := ParseLine([]byte(line), 1)
		switch {
		case (perr == nil) != (lerr == nil):
			t.Errorf("%v: CheckParams %v, line %v", opt, perr, lerr)
		case perr != nil && (perr.Param != lerr.Param || perr.Message != lerr.Message):
			t.Errorf("%v: CheckParams %+v, line %+v", opt, perr, lerr)
		}
	}
	p, err := CheckParams(Chat, map[string]any{"temperature": 0.25, "stop": []string{"a", "b"}, "seed": 7})
	if err != nil || *p.Temperature != 0.25 || len(p.Stop) != 2 || *p.Seed != 7 {
		t.Errorf("valid options: %+v %v", p, err)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
