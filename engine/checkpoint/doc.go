// Package checkpoint opens an mlx-community Qwen3.5/3.6 MoE checkpoint folder
// (config.json, generation_config.json and safetensors shards) and hands its
// tensors to the model's strict loader.
//
// The tensors are memory-mapped read-only, so a 19 GB model is never copied
// into the Go heap; a Tensor's Data is a view into the mapping and stays valid
// until Close.
//
// Only the MLX layout is accepted (spec 3.2): quantised modules are
// <module>.weight (U32 packed codes), .scales and .biases (BF16), the
// depthwise conv weight is stored [C, K, 1], and the five zero-centred norms
// (input_layernorm, post_attention_layernorm, model.norm, q_norm, k_norm)
// already hold 1+w, so nothing is added at load. A raw Hugging Face release
// (conv1d stored [C, 1, K], unshifted norms, fused experts) is rejected at
// Open; convert it with mlx_lm.convert -q first.
//
// Names are normalised to the text model's namespace: language_model.model.X
// and model.language_model.X become model.X, language_model.lm_head.X becomes
// lm_head.X. Vision-tower and multi-token-prediction tensors are skipped and
// listed by Ignored.
//
// Every file is checked before anything is sized from it: a safetensors
// file must be exactly its header and its tensors laid end to end, and each
// size in config.json has a limit (SizeLimit). A checkpoint without a
// quantization block opens (inspect reads it) but RequireQuantized refuses
// it for the model. Digests hashes every byte of every shard for the model
// fingerprint, caching each file's digest on disk.
//
// Raw data is read as little-endian; on a big-endian host the typed views
// decode instead of aliasing the mapping.
package checkpoint
