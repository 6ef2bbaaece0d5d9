// Package chat turns chat requests into prompts with the model's own Jinja chat template,
// and generated text back into an OpenAI-style assistant message.
//
// Templates render with github.com/ardanlabs/jinja, set up as transformers sets up jinja2
// (trim_blocks, lstrip_blocks, raise_exception, strftime_now); request values keep their
// JSON key order, and tojson is json.dumps without ASCII escaping. Renders are byte-equal to
// transformers' apply_chat_template on the oracle goldens for the Qwen3 and Qwen3.5/3.6
// templates. Known gaps, none met in those templates: a float printed other than through
// tojson ({{ x }}, ~, |string) takes Go's %g form (1.0 prints as "1"), and JSON integers
// beyond int64 become floats.
//
// ParseOutput reads the Qwen output format: the <think> block and tool calls in the XML
// form of Qwen3.5/3.6 or the JSON form of Qwen3; ThinkSplitter splits the same text as it
// streams, into reasoning and answer.
package chat
