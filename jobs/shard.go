package jobs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ShardSpec selects every Count-th input line, starting at Index: shard I of
// N takes lines I+1, I+1+N, ... The zero value takes every line.
type ShardSpec struct {
	Index, Count int
}

func (s ShardSpec) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Takes reports whether the input line (1-based, every physical line
// counted, blank ones too) belongs to the shard; so shards depend only on
// line positions, never on content.
func (s ShardSpec) Takes(line int) bool {
	if s.Count <= 1 {
		return true
	}
	return (line-1)%s.Count == s.Index
}

// ParseShard reads --shard: "I/N", or "auto/N" (or just "N") to take I from
// the scheduler: JOB_COMPLETION_INDEX (Kubernetes Indexed Job) or
// SLURM_ARRAY_TASK_ID (Slurm array, made 0-based with SLURM_ARRAY_TASK_MIN
// and SLURM_ARRAY_TASK_STEP when set). env is os.Getenv when nil.
func ParseShard(s string, env func(string) string) (ShardSpec, error) {
	if env == nil {
		env = os.Getenv
	}
	idx, cnt, hasIdx := strings.Cut(strings.TrimSpace(s), "/")
	if !hasIdx {
		idx, cnt = "auto", idx
	}
	count, err := strconv.Atoi(cnt)
	if err != nil || count < 1 {
		return ShardSpec{}, fmt.Errorf("jobs: shard %q: count %q must be a whole number of at least 1 (use I/N, auto/N or N)", s, cnt)
	}
	var index int
	if idx == "auto" {
		if index, err = schedulerIndex(env); err != nil {
			return ShardSpec{}, fmt.Errorf("jobs: shard %q: %w", s, err)
		}
	} else if index, err = strconv.Atoi(idx); err != nil {
		return ShardSpec{}, fmt.Errorf("jobs: shard %q: index %q must be a whole number or \"auto\"", s, idx)
	}
	if index < 0 || index >= count {
		return ShardSpec{}, fmt.Errorf("jobs: shard %q: index %d is out of range 0..%d", s, index, count-1)
	}
	return ShardSpec{Index: index, Count: count}, nil
}

// schedulerIndex is this task's 0-based index in a Kubernetes Indexed Job
// or a Slurm job array.
func schedulerIndex(env func(string) string) (int, error) {
	if v := env("JOB_COMPLETION_INDEX"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("JOB_COMPLETION_INDEX=%q is not a whole number", v)
		}
		return n, nil
	}
	v := env("SLURM_ARRAY_TASK_ID")
	if v == "" {
		return 0, fmt.Errorf("index \"auto\" needs JOB_COMPLETION_INDEX (Kubernetes) or SLURM_ARRAY_TASK_ID (Slurm), and neither is set")
	}
	id, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("SLURM_ARRAY_TASK_ID=%q is not a whole number", v)
	}
	lo, step := 0, 1
	if m := env("SLURM_ARRAY_TASK_MIN"); m != "" {
		if lo, err = strconv.Atoi(m); err != nil {
			return 0, fmt.Errorf("SLURM_ARRAY_TASK_MIN=%q is not a whole number", m)
		}
	}
	if st := env("SLURM_ARRAY_TASK_STEP"); st != "" {
		if step, err = strconv.Atoi(st); err != nil || step < 1 {
			return 0, fmt.Errorf("SLURM_ARRAY_TASK_STEP=%q is not a whole number of at least 1", st)
		}
	}
	if (id-lo)%step != 0 {
		return 0, fmt.Errorf("SLURM_ARRAY_TASK_ID=%d is not on the array's step %d from %d", id, step, lo)
	}
	return (id - lo) / step, nil
}
