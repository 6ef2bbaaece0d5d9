package jobs

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func FuzzReaderNext(f *testing.F) {
	f.Add([]byte(`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}]}}`))
	f.Add([]byte("{\"prompt\":[1,2,3],\"logprobs\":2}\n\n{\"prompt\":[[1]]}\r\n"))
	f.Add([]byte(`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{}}}]}],"enable_thinking":true,"chat_template_kwargs":{"enable_thinking":true}}`))
	f.Add([]byte("\xef\xbb\xbf{\"prompt\":\"x\",\"stop\":[\"a\"],\"seed\":1e3}\n{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		last := 0
		for range len(data) + 2 {
			job, lerr, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Fatalf("I/O error from a byte slice: %v", err)
			}
			if (job == nil) == (lerr == nil) {
				t.Fatalf("job %v and line error %v", job, lerr)
			}
			line := 0
			if job != nil {
				line = job.Line
				if job.Kind == Chat && job.Messages == nil || job.Kind == Completion && job.Prompt == "" && job.PromptIDs == nil && job.Prompts == nil {
					t.Fatalf("job without input: %+v", job)
				}
			} else {
				line = lerr.Line
				if lerr.Message == "" || lerr.Code == "" {
					t.Fatalf("line error without message: %+v", lerr)
				}
			}
			if line <= last {
				t.Fatalf("line %d after line %d", line, last)
			}
			last = line
		}
		t.Fatalf("Next did not reach EOF")
	})
}
