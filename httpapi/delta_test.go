package httpapi

import (
	"strings"
	"testing"

	"petal/engine/chat"
)

// The streamed reasoning and content deltas, however the text is cut into
// pieces, add up to the message chat.ParseOutput makes of the whole text,
// and nothing of a tool call's XML is streamed as content.
func TestChatDeltasAddUpToTheParsedMessage(t *testing.T) {
	call := "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
	cases := []struct {
		text       string
		inThinking bool
	}{
		{"I consider.\n</think>\n\nParis.", true},
		{"<think>\nhmm\n</think>\n\nThe answer:\n\n    x = 1\n", false},
		{"Plain answer, no tags.", false},
		{"cut off while thinking </thi", true},
		{"The user wants weather.\n</think>\n\nLet me check.\n\n" + call, true},
		{"I need the weather.\n" + call, true}, // a tool call begun inside the reasoning
		{call, false},
		{"Use <tool_call>like this</tool_call> to call.", false}, // not a call: stays content
		{"<think>\n\n</think>\n\nok  \n", false},
	}
	for _, c := range cases {
		want := chat.ParseOutput(c.text, chat.ParseOptions{InThinking: c.inThinking})
		for cut := 0; cut <= len(c.text); cut++ {
			for _, pieces := range [][]string{{c.text[:cut], c.text[cut:]}, strings.SplitAfter(c.text[:cut], "")} {
				var r, a strings.Builder
				d := newChatDeltas(c.inThinking, func(x string) { r.WriteString(x) }, func(x string) {
					if strings.Contains(x, "<function=") {
						t.Errorf("%q: tool call XML streamed as content: %q", c.text, x)
					}
					a.WriteString(x)
				})
				for _, p := range pieces {
					d.write(p)
				}
				if len(pieces) > 2 {
					d.write(c.text[cut:])
				}
				d.finish(want.Reasoning, want.Content)
				if r.String() != want.Reasoning || a.String() != want.Content {
					t.Fatalf("%q cut at %d: reasoning %q content %q; want %q and %q", c.text, cut, r.String(), a.String(), want.Reasoning, want.Content)
				}
			}
		}
	}
}
