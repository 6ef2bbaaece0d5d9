package jobs

// Usage counts a request's tokens.
type Usage struct {
	PromptTokens            int                     `json:"prompt_tokens"`
	CompletionTokens        int                     `json:"completion_tokens"`
	TotalTokens             int                     `json:"total_tokens"`
	PromptTokensDetails     PromptTokensDetails     `json:"prompt_tokens_details"`
	CompletionTokensDetails CompletionTokensDetails `json:"completion_tokens_details"`
}

type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"` // restored from a snapshot, not prefilled
}

type CompletionTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"` // inside the thinking block
}

// NewUsage fills a Usage, total included.
func NewUsage(prompt, completion, cached, reasoning int) Usage {
	return Usage{
		PromptTokens:            prompt,
		CompletionTokens:        completion,
		TotalTokens:             prompt + completion,
		PromptTokensDetails:     PromptTokensDetails{CachedTokens: cached},
		CompletionTokensDetails: CompletionTokensDetails{ReasoningTokens: reasoning},
	}
}

// Timings are one request's timings, in llama-server's names with petal's
// additions. Times are milliseconds.
type Timings struct {
	PromptN  int     `json:"prompt_n"`  // prompt tokens prefilled (not restored: see CacheN)
	PromptMS float64 `json:"prompt_ms"` // prefill time, up to the first token's logits
	// PromptPerSecond is PromptN / PromptMS * 1000 (set by Finish).
	PromptPerSecond float64 `json:"prompt_per_second"`

	PredictedN  int     `json:"predicted_n"`  // generated tokens, the first included
	PredictedMS float64 `json:"predicted_ms"` // decode time after the first token
	// PredictedPerSecond is (PredictedN - 1) / PredictedMS * 1000 (set by
	// Finish): the first token comes out of prefill, so the decode rate
	// counts the tokens after it, as vLLM and SGLang benchmarks do.
	PredictedPerSecond float64 `json:"predicted_per_second"`

	CacheN    int     `json:"cache_n"`    // prompt tokens restored from a snapshot
	LoadMS    float64 `json:"load_ms"`    // model load, on the first job of a process
	RestoreMS float64 `json:"restore_ms"` // session snapshot restore
	SaveMS    float64 `json:"save_ms"`    // session snapshot save
	TTFTMS    float64 `json:"ttft_ms"`    // from start of the job to the first token
	TotalMS   float64 `json:"total_ms"`   // the whole job
}

// Finish computes the rates from the counts and times; a rate is zero when
// it is undefined (no tokens, or no time).
func (t *Timings) Finish() { t.FinishRuns(1) }

// FinishRuns is Finish for timings summed over several generations (a list
// of prompts): each one's first token comes out of its prefill, so the
// decode rate counts the tokens after each first one.
func (t *Timings) FinishRuns(runs int) {
	t.PromptPerSecond = perSecond(t.PromptN, t.PromptMS)
	t.PredictedPerSecond = perSecond(t.PredictedN-runs, t.PredictedMS)
}

func perSecond(n int, ms float64) float64 {
	if n <= 0 || !(ms > 0) {
		return 0
	}
	return float64(n) / ms * 1000
}
