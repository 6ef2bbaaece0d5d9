package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/urfave/cli/v2"

	"petal/engine"
	"petal/engine/executor"
	"petal/httpapi"
	"petal/jobs"
)

type serveOptions struct {
	modelOptions
	sessionOptions
	Host         string
	Port         int
	Queue        int
	APIKey       string
	CORSOrigins  []string
	MaxRequestMB int
	ServedName   string
	Quiet        bool
}

func serveCommand(st *Streams) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve the model over an OpenAI-compatible HTTP API, with streaming",
		Description: `Endpoints:
  POST /v1/chat/completions, POST /v1/completions   the same request fields, validation, usage,
      timings and error objects as batch (and the session / fork_from extensions); "stream": true
      answers with server-sent events ("data: {chunk}" lines, then "data: [DONE]";
      stream_options.include_usage adds a last chunk with usage; the think block streams as
      delta.reasoning_content, tool calls as delta.tool_calls)
  GET  /v1/models, /v1/models/ID                    the served model
  POST /tokenize, /detokenize                       vLLM's: {"prompt"} or {"messages"} to {"tokens"},
                                                    {"tokens"} to {"prompt"}
  GET  /health                                      {"status": "ok"} (503 while stopping)
  GET  /metrics                                     Prometheus: requests, tokens, time to first token,
                                                    prefill and decode rates, queue depth, cache hits

One request runs at a time; up to --queue more wait, in order of arrival; beyond that a request
gets 429 with Retry-After. A client that disconnects cancels its request (queued or running); a
cancelled turn leaves nothing in its session (no message, no snapshot). Every request that resends an
earlier conversation (as agent loops do) continues from the longest prefix kept in memory at a
message boundary (--prefix-cache MB): usage.prompt_tokens_details.cached_tokens counts it.

Safe by default: it listens on 127.0.0.1 unless --host says otherwise; --api-key (or
$PETAL_API_KEY) requires "Authorization: Bearer KEY" on every endpoint but /health; bodies are
limited to --max-request-mb; a request's headers must arrive within 10 s and its body within 60 s,
and idle connections close after 120 s (the answer itself has no time limit); browsers may call it
from other origins only as --cors-origin allows. SIGINT or SIGTERM stops accepting requests, sends
the waiting ones away (503), lets the running one finish, and exits 0; a second signal ends petal
at once.`,
		Flags: append(append(modelFlags(), storeFlag()),
			&cli.StringFlag{Name: "host", Value: "127.0.0.1", Usage: "address to listen on (0.0.0.0 or :: for every interface: then set --api-key)"},
			&cli.IntFlag{Name: "port", Value: 8080, Usage: "TCP port (0: any free port, printed on stderr)"},
			&cli.IntFlag{Name: "queue", Value: 16, Usage: "requests that may wait behind the running one; more get 429"},
			&cli.StringFlag{Name: "api-key", Usage: "require \"Authorization: Bearer KEY\" (default: $PETAL_API_KEY; none: no key)"},
			&cli.StringSliceFlag{Name: "cors-origin", Usage: "allow browser calls from this origin (repeatable; * for any); default: none"},
			&cli.IntFlag{Name: "prefix-cache", Value: 1024, Usage: "MB of model states kept in memory at message boundaries, so a request resending an earlier conversation continues from it (0: none)"},
			&cli.IntFlag{Name: "max-request-mb", Value: 32, Usage: "largest request body, in MB (413 beyond it)"},
			&cli.StringFlag{Name: "served-model-name", Usage: "the model id /v1/models lists and answers carry (default: the model's name)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no line per request on stderr"},
		),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageErr("serve takes no arguments (got %q): the model is --model", c.Args().First())
			}
			o := serveOptions{
				modelOptions:   readModelOptions(c),
				sessionOptions: sessionOptions{Dir: c.String("sessions"), PrefixCacheMB: c.Int("prefix-cache")},
				Host:           c.String("host"), Port: c.Int("port"), Queue: c.Int("queue"),
				APIKey: c.String("api-key"), CORSOrigins: c.StringSlice("cors-origin"),
				MaxRequestMB: c.Int("max-request-mb"), ServedName: c.String("served-model-name"), Quiet: c.Bool("quiet"),
			}
			if o.APIKey == "" {
				o.APIKey = st.Getenv("PETAL_API_KEY")
			}
			return runServe(c.Context, st, o)
		},
	}
}

func runServe(ctx context.Context, st *Streams, o serveOptions) error {
	switch {
	case o.Port < 0 || o.Port > 65535:
		return usageErr("--port %d: want 0 to 65535", o.Port)
	case o.Queue < 0:
		return usageErr("--queue %d: want 0 or more", o.Queue)
	case o.MaxRequestMB < 1:
		return usageErr("--max-request-mb %d: want at least 1", o.MaxRequestMB)
	case o.PrefixCacheMB < 0:
		return usageErr("--prefix-cache %d: want 0 or more", o.PrefixCacheMB)
	}
	api, e, name, err := newServeAPI(st, o)
	if err != nil {
		return err
	}
	defer e.Close()
	ln, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	if err != nil {
		return usageErr("cannot listen on %s port %d: %v", o.Host, o.Port, err)
	}
	if ip := net.ParseIP(o.Host); o.APIKey == "" && (ip == nil && o.Host != "localhost" || ip != nil && !ip.IsLoopback()) {
		fmt.Fprintf(st.Err, "petal: warning: listening on %s without --api-key: anyone who can reach this address can use the model\n", o.Host)
	}
	fmt.Fprintf(st.Err, "petal: serving %s on http://%s (one request at a time, %d may wait; Ctrl-C stops)\n", name, ln.Addr(), o.Queue)
	if err := api.Serve(ctx, ln, httpapi.DefaultTimeouts); err != nil {
		return err
	}
	fmt.Fprintln(st.Err, "petal: stopped: the running request was finished")
	return nil
}

// newServeAPI opens the model and the session store and builds the HTTP
// API over one executor, kept for the whole life of the server: its prefix
// cache carries states from one request to the next.
func newServeAPI(st *Streams, o serveOptions) (*httpapi.Server, *engine.Engine, string, error) {
	e, name, err := openEngine(st, o.modelOptions)
	if err != nil {
		return nil, nil, "", err
	}
	if o.ServedName != "" {
		name = o.ServedName
	}
	x, err := newExecutor(st, o.sessionOptions, e, name, 0)
	if err != nil {
		e.Close()
		return nil, nil, "", err
	}
	var log io.Writer = st.Err
	if o.Quiet {
		log = nil
	}
	api := httpapi.New(httpapi.Config{
		Executor: serveExecutor{x}, Model: &serveModel{e: e, x: x, name: name},
		Queue: o.Queue, APIKey: o.APIKey, CORSOrigins: o.CORSOrigins,
		MaxBodyBytes: int64(o.MaxRequestMB) << 20, Log: log,
	})
	return api, e, name, nil
}

// serveExecutor puts the executor batch uses behind httpapi's interface
// (their Streams have the same fields).
type serveExecutor struct{ x *executor.Executor }

func (s serveExecutor) Execute(ctx context.Context, job *jobs.Job, out httpapi.Stream) (*httpapi.Outcome, *httpapi.Failure) {
	res, jerr := s.x.Run(ctx, job, executor.Stream(out))
	if jerr != nil {
		e := jerr.APIError()
		return nil, &httpapi.Failure{Status: jerr.Status, Param: e.Param, Code: e.Code, Err: jerr.Err}
	}
	return &httpapi.Outcome{Body: res.Body, Warnings: res.Warnings}, nil
}

// serveModel answers the server's questions about the model.
type serveModel struct {
	e    *engine.Engine
	x    *executor.Executor
	name string
}

func (m *serveModel) Name() string               { return m.name }
func (m *serveModel) MaxContext() int            { return m.e.MaxContext }
func (m *serveModel) VocabSize() int             { return m.e.Tokenizer.VocabSize() }
func (m *serveModel) Encode(text string) []int32 { return m.e.Encode(text) }
func (m *serveModel) Decode(ids []int32) string  { return m.e.Tokenizer.Decode(toInts(ids), false) }
func (m *serveModel) Token(id int32) string      { return m.e.Tokenizer.Token(int(id)) }

func (m *serveModel) RenderChat(job *jobs.Job, addGenerationPrompt bool) (string, error) {
	return m.x.RenderChat(job, addGenerationPrompt)
}

func toInts(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}
