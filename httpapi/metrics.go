package httpapi

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"petal/jobs"
)

// metrics are the server's Prometheus metrics, on a registry of its own
// (with the Go runtime's and the process's, memory included).
type metrics struct {
	registry *prometheus.Registry

	requests        *prometheus.CounterVec   // endpoint, status
	duration        *prometheus.HistogramVec // endpoint
	promptTokens    prometheus.Counter
	cachedTokens    prometheus.Counter
	prefilledTokens prometheus.Counter
	generatedTokens prometheus.Counter
	ttft            prometheus.Histogram
	prefillRate     prometheus.Histogram
	decodeRate      prometheus.Histogram
	queueDepth      prometheus.Gauge
	running         prometheus.Gauge
	cacheHits       prometheus.Counter
	cacheMisses     prometheus.Counter
}

func newMetrics() *metrics {
	rates := prometheus.ExponentialBuckets(1, 2, 16) // 1 to 32768 tokens/s
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "petal_requests_total", Help: "HTTP requests answered, by endpoint and status code (\"cancelled\": the client went away first).",
		}, []string{"endpoint", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "petal_request_duration_seconds", Help: "Time from a request's arrival to its last byte, queueing included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}, []string{"endpoint"}),
		promptTokens:    prometheus.NewCounter(prometheus.CounterOpts{Name: "petal_prompt_tokens_total", Help: "Prompt tokens of finished requests, restored or prefilled."}),
		cachedTokens:    prometheus.NewCounter(prometheus.CounterOpts{Name: "petal_prompt_cached_tokens_total", Help: "Prompt tokens restored from a saved state (a session or the prefix cache), not prefilled."}),
		prefilledTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "petal_prompt_prefilled_tokens_total", Help: "Prompt tokens run through the model."}),
		generatedTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "petal_generation_tokens_total", Help: "Tokens generated."}),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "petal_time_to_first_token_seconds", Help: "From the start of a job (after queueing) to its first generated token.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}),
		prefillRate: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "petal_prefill_tokens_per_second", Help: "Prefill rate of each request that prefilled tokens.", Buckets: rates}),
		decodeRate:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "petal_decode_tokens_per_second", Help: "Decode rate of each request that generated two tokens or more (the tokens after the first).", Buckets: rates}),
		queueDepth:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "petal_queue_depth", Help: "Requests waiting behind the running one."}),
		running:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "petal_requests_running", Help: "Requests running (0 or 1)."}),
		cacheHits:   prometheus.NewCounter(prometheus.CounterOpts{Name: "petal_prefix_cache_hits_total", Help: "Requests that continued from a saved state (cached_tokens > 0)."}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{Name: "petal_prefix_cache_misses_total", Help: "Requests that prefilled their whole prompt."}),
	}
	m.registry.MustRegister(m.requests, m.duration, m.promptTokens, m.cachedTokens, m.prefilledTokens, m.generatedTokens,
		m.ttft, m.prefillRate, m.decodeRate, m.queueDepth, m.running, m.cacheHits, m.cacheMisses,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

func (m *metrics) answered(endpoint string, status int) {
	m.requests.WithLabelValues(endpoint, strconv.Itoa(status)).Inc()
}

func (m *metrics) cancelled(endpoint string) {
	m.requests.WithLabelValues(endpoint, "cancelled").Inc()
}

// finished records a job's usage and timings.
func (m *metrics) finished(u jobs.Usage, t jobs.Timings) {
	m.promptTokens.Add(float64(u.PromptTokens))
	m.cachedTokens.Add(float64(u.PromptTokensDetails.CachedTokens))
	m.prefilledTokens.Add(float64(t.PromptN))
	m.generatedTokens.Add(float64(u.CompletionTokens))
	if u.PromptTokensDetails.CachedTokens > 0 {
		m.cacheHits.Inc()
	} else {
		m.cacheMisses.Inc()
	}
	if t.PredictedN > 0 {
		m.ttft.Observe(t.TTFTMS / 1000)
	}
	if t.PromptPerSecond > 0 {
		m.prefillRate.Observe(t.PromptPerSecond)
	}
	if t.PredictedPerSecond > 0 {
		m.decodeRate.Observe(t.PredictedPerSecond)
	}
}
