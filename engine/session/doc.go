// Package session keeps exact snapshots of sequence states on disk, so that
// a conversation (an agent's trajectory) continues in a later process
// without being prefilled again. The hybrid model's recurrent state cannot
// be cut back to an earlier position, so a snapshot is saved at each turn
// boundary and a request resumes from the latest one that fits.
//
// # Snapshots
//
// A snapshot file holds a model.StateData: the token history, the used rows
// of each full-attention layer's K and V caches, and each Gated DeltaNet
// layer's conv and float32 recurrent state, with a format version, the
// model's Fingerprint (ModelFingerprint: config.json, tensor index,
// quantisation, a digest of every byte of the shards) and CRC32C checksums (see
// format.go for the layout). Encode/Decode work on streams, WriteFile and
// ReadFile on files; writes are atomic (temporary file, fsync, rename, fsync
// of the folder), so a killed writer leaves the previous snapshot intact.
// Snapshot files are readable by their owner only: they hold conversations.
//
// A snapshot that is damaged (checksum, truncation, structure), of an
// unknown version or from another model is never used: reading it gives a
// *SnapshotError naming the file and the reason (errors.Is with
// ErrCorrupt, ErrTruncated, ErrVersion, ErrOtherModel).
//
// Snapshots are not compressed: float32 state barely compresses. On a 1K
// token snapshot of the oracle model (7.5 MB), klauspost/compress zstd
// stored it at 100.0% of its size at its fastest and default levels and
// 95.8% at "better" (29 ms, against about 10 ms for writing and syncing the
// file); shuffling bytes into planes first reached 83.8% for 45 ms of CPU.
//
// # Store
//
// A Store is a folder (DefaultDir: <user cache dir>/petal/sessions) opened
// for one model:
//
//	st, err := session.OpenStore(dir, session.ModelFingerprint(ck), session.StoreOptions{})
//
// A request naming a session holds the session's lock for its whole run, so
// two processes never interleave turns of one session:
//
//	ss, err := st.Lock(name)           // waits up to LockTimeout, else *LockError
//	defer ss.Unlock()
//	r, err := st.Latest(name)          // *SnapshotError: an error for the job; ErrNoSession: a new session
//	s, err := m.Import(r.Data, maxContext)
//	... run the new turn's tokens, generate ...
//	data, err := m.Snapshot(s)
//	_, err = ss.SaveTurn(data)         // next turn; the oldest beyond Retention are deleted
//
// A request that resends the whole history of a session uses
// LongestPrefixOf(name, prompt) instead of Latest: the longest kept turn
// whose tokens are a proper prefix of the prompt, so a history that
// diverges from the last turn resumes from an earlier boundary. A prefix is
// proper when at least one prompt token is left to run: snapshots hold no
// logits, so the last prompt token is always run after restoring. When the
// snapshot it would restore is damaged or from another model (or a newer
// one's header is damaged) it fails naming that file; snapshots the prompt
// does not need are listed in Restored.Skipped for the job's warnings. Fork
// (fork_from) starts a new session from another's snapshots (hard links,
// or copies) and conversation.
//
// The session's Conversation (SaveConversation, Conversation) holds its
// messages and a TurnRecord per turn: the request that appended it and a
// hash of the history before it, so that a request committed again on the
// same history (FindTurn) replaces its turn instead of appending it twice.
//
// Requests without a session use a PrefixCache: recent states in memory,
// backed by the store's per-model prefix snapshots (SavePrefix,
// LongestPrefix) across runs. Its LongestPrefix has the same proper-prefix
// rule; Add hands a state (for example the state after all but the last
// prompt token, or after a finished turn) to the cache.
//
// d.Tokens must always be exactly the tokens the state has consumed (a
// generated token that was never run through the model is not part of it).
//
// List, Show, Verify, Remove, Prefixes and GC serve `petal sessions`.
// Verify reads every byte of every snapshot. GC removes whole sessions
// (never only their latest turns) and prefix snapshots, oldest first, by
// age and total size, and the temporary files of writers that are gone (a
// writer holds a lock on its temporary file). Waiting for a session's lock
// is fair (see acquireLock). Store methods are safe for concurrent use by
// goroutines and processes; on systems without flock, concurrent writers
// of one session are not kept apart.
package session
