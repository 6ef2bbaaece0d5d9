package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"petal/jobs"
)

// Config is what a Server serves and how.
type Config struct {
	Executor Executor
	Model    Model
	// Queue is how many requests may wait behind the running one; more get
	// 429 with Retry-After.
	Queue int
	// APIKey, when set, is required of every request but /health as
	// "Authorization: Bearer KEY".
	APIKey string
	// CORSOrigins are the browser origins allowed to call the API ("*" for
	// any); none: no CORS headers, browsers refuse cross-origin calls.
	CORSOrigins []string
	// MaxBodyBytes bounds a request body (413 beyond it); 0 means 32 MiB.
	MaxBodyBytes int64
	// Log receives one line per completion request and the stacks of
	// internal errors; nil discards them.
	Log io.Writer
}

// Timeouts of the HTTP server. A request's body must arrive within Read;
// after that the connection has no deadline while the request waits and
// runs (a long generation is not cut off), and a client that goes away
// cancels it.
type Timeouts struct {
	ReadHeader time.Duration
	Read       time.Duration
	Idle       time.Duration
}

// DefaultTimeouts suit clients on a network: slow ones cannot hold
// connections open for nothing.
var DefaultTimeouts = Timeouts{ReadHeader: 10 * time.Second, Read: 60 * time.Second, Idle: 120 * time.Second}

// Server is the HTTP API over one executor.
type Server struct {
	cfg     Config
	queue   *queue
	metrics *metrics
	routes  map[string]route
	created int64
	logMu   sync.Mutex
}

type route struct {
	method  string
	handler http.HandlerFunc
	open    bool // served without the API key
}

// New builds a server; Handler serves it, Serve runs it on a listener.
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 32 << 20
	}
	s := &Server{cfg: cfg, metrics: newMetrics(), created: time.Now().Unix()}
	s.queue = newQueue(max(cfg.Queue, 0), func(n int) { s.metrics.queueDepth.Set(float64(n)) })
	s.routes = map[string]route{
		"/v1/chat/completions": {method: http.MethodPost, handler: s.completion(jobs.Chat)},
		"/v1/completions":      {method: http.MethodPost, handler: s.completion(jobs.Completion)},
		"/v1/models":           {method: http.MethodGet, handler: s.models},
		"/health":              {method: http.MethodGet, handler: s.health, open: true},
		"/tokenize":            {method: http.MethodPost, handler: s.tokenize},
		"/detokenize":          {method: http.MethodPost, handler: s.detokenize},
		"/metrics":             {method: http.MethodGet, handler: s.metrics.handler().ServeHTTP},
	}
	return s
}

// Handler routes requests, checks the API key and applies CORS.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	path := r.URL.Path
	rt, ok := s.routes[path]
	if !ok && strings.HasPrefix(path, "/v1/models/") {
		rt, ok = route{method: http.MethodGet, handler: s.model}, true
	}
	endpoint := path
	if !ok {
		endpoint = "other"
	} else if strings.HasPrefix(path, "/v1/models/") {
		endpoint = "/v1/models/{id}"
	}
	rec := &recorder{ResponseWriter: w}
	defer func() {
		if rec.cancelled {
			s.metrics.cancelled(endpoint)
		} else {
			s.metrics.answered(endpoint, cmp.Or(rec.status, http.StatusOK))
		}
		s.metrics.duration.WithLabelValues(endpoint).Observe(time.Since(start).Seconds())
	}()
	s.route(rec, r, rt, ok)
}

func (s *Server) route(w *recorder, r *http.Request, rt route, ok bool) {
	path := r.URL.Path
	if s.cors(w, r) {
		return // a preflight, answered
	}
	if !ok {
		writeError(w, http.StatusNotFound, jobs.APIError{Message: fmt.Sprintf("no endpoint %s %s (see petal serve --help)", r.Method, path), Type: jobs.InvalidRequest, Code: "not_found"})
		return
	}
	if !rt.open && !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="petal"`)
		writeError(w, http.StatusUnauthorized, jobs.APIError{Message: "a valid API key is required: send \"Authorization: Bearer KEY\" (the key petal serve was given with --api-key or PETAL_API_KEY)", Type: jobs.InvalidRequest, Code: "invalid_api_key"})
		return
	}
	if r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", rt.method)
		writeError(w, http.StatusMethodNotAllowed, jobs.APIError{Message: fmt.Sprintf("%s takes %s, not %s", path, rt.method, r.Method), Type: jobs.InvalidRequest, Code: "method_not_allowed"})
		return
	}
	rt.handler(w, r)
}

// authorized compares the bearer token with the key in constant time (of
// their hashes, so that not even the key's length leaks).
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		token, ok = strings.CutPrefix(auth, "bearer ")
	}
	want := sha256.Sum256([]byte(s.cfg.APIKey))
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(want[:], got[:]) == 1 && ok
}

// cors sets the CORS headers for an allowed origin and answers its
// preflight (true: the request is answered).
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || len(s.cfg.CORSOrigins) == 0 {
		return false
	}
	w.Header().Add("Vary", "Origin")
	if !slices.Contains(s.cfg.CORSOrigins, "*") && !slices.Contains(s.cfg.CORSOrigins, origin) {
		return false
	}
	w.Header().Set("Access-Control-Allow-Origin", origin)
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
		w.Header().Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	return false
}

// Serve answers requests on l until ctx ends, then stops accepting, sends
// the waiting requests away (503), lets the running one finish, and
// returns.
func (s *Server) Serve(ctx context.Context, l net.Listener, t Timeouts) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		IdleTimeout:       t.Idle,
		ErrorLog:          nil,
	}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	s.queue.drain()
	err := hs.Shutdown(context.Background())
	<-done
	return err
}

// Drain refuses new completion requests (503) and sends the waiting ones
// away; the running one finishes. Serve calls it when its context ends.
func (s *Server) Drain() { s.queue.drain() }

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Log == nil {
		return
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.cfg.Log, "petal: "+format+"\n", args...)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.queue.draining:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting down"})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

type modelObject struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len"`
}

func (s *Server) modelObject() modelObject {
	return modelObject{ID: s.cfg.Model.Name(), Object: "model", Created: s.created, OwnedBy: "petal", MaxModelLen: s.cfg.Model.MaxContext()}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []modelObject{s.modelObject()}})
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimPrefix(r.URL.Path, "/v1/models/")
	if id != s.cfg.Model.Name() {
		writeError(w, http.StatusNotFound, jobs.APIError{Message: fmt.Sprintf("model %q is not served here; this server serves %q", id, s.cfg.Model.Name()), Type: jobs.InvalidRequest, Param: "model", Code: "model_not_found"})
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

// readBody reads a request body within the size limit; false: the error
// is answered.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, jobs.APIError{Message: fmt.Sprintf("the request body is larger than %d bytes (see petal serve --max-request-mb)", s.cfg.MaxBodyBytes), Type: jobs.InvalidRequest, Code: "request_too_large"})
		return nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, jobs.APIError{Message: "reading the request body: " + err.Error(), Type: jobs.InvalidRequest})
		return nil, false
	}
	return body, true
}

// marshal encodes v as batch result lines are encoded: without escaping
// <, > and & (chat prompts are full of them).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"encoding the response failed","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, e jobs.APIError) {
	writeJSON(w, status, map[string]any{"error": e})
}

// failureError is a failed job's error object, as batch writes it.
func failureError(f *Failure) jobs.APIError {
	typ := jobs.InvalidRequest
	if f.Status >= 500 {
		typ = jobs.ServerError
	}
	return jobs.APIError{Message: f.Err.Error(), Type: typ, Param: f.Param, Code: f.Code}
}

// recorder is the response of one request, as the metrics and the log
// see it.
type recorder struct {
	http.ResponseWriter
	status    int
	cancelled bool     // the client went away before its answer
	sum       *summary // a completion's usage, for the log
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// outcome describes the answer for the log.
func (r *recorder) outcome() string {
	switch {
	case r.cancelled:
		return "cancelled (the client went away)"
	case r.sum != nil:
		u := r.sum.usage
		return fmt.Sprintf("%d: %d prompt tokens (%d cached) + %d generated, %s", cmp.Or(r.status, 200), u.PromptTokens, u.PromptTokensDetails.CachedTokens, u.CompletionTokens, r.sum.finishReason)
	}
	return strconv.Itoa(cmp.Or(r.status, 200))
}
