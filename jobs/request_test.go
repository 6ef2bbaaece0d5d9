package jobs

import (
	"strings"
	"testing"
)

func TestParseRequest(t *testing.T) {
	job, own, lerr := ParseRequest([]byte(`{"messages": [{"role": "user", "content": "hi"}], "stream": true, "stream_options": {"include_usage": true}, "user": "u1", "max_tokens": 5}`),
		Chat, "stream", "stream_options")
	if lerr != nil {
		t.Fatal(lerr)
	}
	if job.Kind != Chat || *job.Params.MaxTokens != 5 || string(own["stream"]) != "true" || string(own["stream_options"]) != `{"include_usage": true}` {
		t.Errorf("job %+v, own %s", job, own)
	}
	if len(job.Ignored) != 1 || job.Ignored[0] != "user" {
		t.Errorf("ignored %v, want [user]: the fields the caller reads are not ignored", job.Ignored)
	}

	// without taking it, stream is refused as in batch
	if _, _, lerr := ParseRequest([]byte(`{"prompt": "x", "stream": true}`), Completion); lerr == nil || lerr.Param != "stream" {
		t.Errorf("stream not taken: %v, want the batch refusal", lerr)
	}

	cases := []struct {
		body  string
		kind  Kind
		param string
		msg   string
	}{
		{`{"prompt": "x"}`, Chat, "messages", `field "messages" is required for /v1/chat/completions`},
		{`{"messages": [{"role": "user", "content": "x"}]}`, Completion, "prompt", `field "prompt" is required for /v1/completions`},
		{`{"messages": []}`, Chat, "messages", `must not be empty`},
		{`{"prompt": "x", "temperature": 3}`, Completion, "temperature", `between 0 and 2`},
		{`{"prompt": "x",`, Completion, "", `request body is not valid JSON`},
		{`[1]`, Completion, "", `request body must be a JSON object, got array`},
	}
	for _, c := range cases {
		_, _, lerr := ParseRequest([]byte(c.body), c.kind, "stream")
		if lerr == nil || lerr.Param != c.param || !strings.Contains(lerr.Message, c.msg) {
			t.Errorf("%s to %s: %+v, want param %q and %q", c.body, c.kind.URL(), lerr, c.param, c.msg)
		}
	}
}
