//go:build race

package quant

// The race detector makes sync.Pool drop items on purpose, so the
// allocation counts of pooled calls mean nothing under it.
const raceEnabled = true
