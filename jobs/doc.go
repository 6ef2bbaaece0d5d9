// Package jobs is petal's batch data layer: it decodes and validates job
// lines (OpenAI Batch envelopes or bare request bodies), encodes result
// lines in the shapes OpenAI and llama-server made common, and provides
// resume, sharding and merging of result files.
//
// It knows nothing of the model: the batch command turns a Job into an
// engine request and the engine's answer into a ChatCompletion or
// TextCompletion, which Success wraps into an output line.
//
// Identifiers written into result lines (the Batch line id, request_id and
// the completion id) are deterministic: each is a hash of the input line
// number and custom_id, so running the same input twice, or in shards, gives
// the same ids.
package jobs
