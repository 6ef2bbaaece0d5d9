package jobs

import (
	"slices"
	"strings"
	"testing"
)

func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestShardPartition(t *testing.T) {
	for count := 1; count <= 7; count++ {
		var shards []ShardSpec
		for i := range count {
			shards = append(shards, ShardSpec{Index: i, Count: count})
		}
		for line := 1; line <= 50; line++ {
			owners := 0
			for _, s := range shards {
				if s.Takes(line) {
					owners++
				}
			}
			if owners != 1 {
				t.Fatalf("count %d: line %d is in %d shards", count, line, owners)
			}
		}
	}
	if s := (ShardSpec{Index: 1, Count: 3}); !s.Takes(2) || !s.Takes(5) || s.Takes(1) || s.Takes(3) {
		t.Error("shard 1/3 must take lines 2, 5, ...")
	}
	if !(ShardSpec{}).Takes(17) {
		t.Error("the zero ShardSpec must take every line")
	}
}

func TestShardsOverReader(t *testing.T) {
	// Blank and bad lines still count, so shards never depend on content.
	input := "{\"prompt\":\"1\"}\n\n{\"prompt\":\"3\"}\nbad\n{\"prompt\":\"5\"}\n{\"prompt\":\"6\"}\n\n{\"prompt\":\"8\"}\n"
	seen := map[int]int{}
	for i := range 3 {
		r := NewReader(strings.NewReader(input))
		r.Take = ShardSpec{Index: i, Count: 3}.Takes
		jobs, lerrs := readAll(t, r)
		for _, j := range jobs {
			seen[j.Line]++
			if (j.Line-1)%3 != i {
				t.Errorf("shard %d got line %d", i, j.Line)
			}
		}
		for _, e := range lerrs {
			seen[e.Line]++
		}
	}
	for _, line := range []int{1, 3, 4, 5, 6, 8} {
		if seen[line] != 1 {
			t.Errorf("line %d read %d times", line, seen[line])
		}
	}
	if len(seen) != 6 {
		t.Errorf("lines read: %v", seen)
	}
}

// TestShardsFindDuplicateIDs: over all shards, the lines that fail as
// duplicates are those that fail in one unsharded run (the later of two
// with one custom_id, wherever the earlier lies; a bad line's id counts),
// and no other.
func TestShardsFindDuplicateIDs(t *testing.T) {
	env := func(id, content string) string {
		return `{"custom_id":"` + id + `","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"` + content + `"}]}}`
	}
	input := strings.Join([]string{
		env("a", "1"),
		env("b", "2"),
		env("a", "3"),                       // a's second: fails
		`{"custom_id":"c","method":"POST"}`, // bad, but c is used
		env("c", "5"),                       // fails
		env("d", "6"),
		env("b", "7"), // fails
		"",
		env("e", "9"),
	}, "\n") + "\n"
	dups := func(r *Reader) []int {
		_, lerrs := readAll(t, r)
		var lines []int
		for _, e := range lerrs {
			if e.Code == CodeDuplicateID {
				lines = append(lines, e.Line)
			}
		}
		return lines
	}
	want := dups(NewReader(strings.NewReader(input)))
	if !slices.Equal(want, []int{3, 5, 7}) {
		t.Fatalf("one run: duplicates on lines %v, want 3, 5, 7", want)
	}
	for _, n := range []int{2, 3, 4} {
		var got []int
		for i := range n {
			r := NewReader(strings.NewReader(input))
			r.Take = ShardSpec{Index: i, Count: n}.Takes
			got = append(got, dups(r)...)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%d shards: duplicates on lines %v, want %v", n, got, want)
		}
	}
}

func TestParseShard(t *testing.T) {
	cases := []struct {
		spec string
		env  map[string]string
		want ShardSpec
	}{
		{"0/4", nil, ShardSpec{0, 4}},
		{"3/4", nil, ShardSpec{3, 4}},
		{" 2/3 ", nil, ShardSpec{2, 3}},
		{"0/1", nil, ShardSpec{0, 1}},
		{"auto/4", map[string]string{"JOB_COMPLETION_INDEX": "2"}, ShardSpec{2, 4}},
		{"4", map[string]string{"JOB_COMPLETION_INDEX": "3", "SLURM_ARRAY_TASK_ID": "0"}, ShardSpec{3, 4}},
		{"auto/4", map[string]string{"SLURM_ARRAY_TASK_ID": "1"}, ShardSpec{1, 4}},
		{"auto/4", map[string]string{"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "1"}, ShardSpec{3, 4}},
		{"auto/3", map[string]string{"SLURM_ARRAY_TASK_ID": "20", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_STEP": "10"}, ShardSpec{2, 3}},
	}
	for _, c := range cases {
		got, err := ParseShard(c.spec, envOf(c.env))
		if err != nil || got != c.want {
			t.Errorf("ParseShard(%q, %v) = %v, %v; want %v", c.spec, c.env, got, err, c.want)
		}
	}
	if got := (ShardSpec{2, 5}).String(); got != "2/5" {
		t.Errorf("String() = %q", got)
	}
}

func TestParseShardErrors(t *testing.T) {
	cases := []struct {
		spec string
		env  map[string]string
		want string
	}{
		{"4/4", nil, "index 4 is out of range 0..3"},
		{"-1/4", nil, "index -1 is out of range 0..3"},
		{"1/0", nil, `count "0" must be a whole number of at least 1`},
		{"x/4", nil, `index "x" must be a whole number or "auto"`},
		{"1/y", nil, `count "y"`},
		{"", nil, `count ""`},
		{"auto/4", nil, "needs JOB_COMPLETION_INDEX (Kubernetes) or SLURM_ARRAY_TASK_ID (Slurm), and neither is set"},
		{"auto/4", map[string]string{"JOB_COMPLETION_INDEX": "4"}, "index 4 is out of range 0..3"},
		{"auto/4", map[string]string{"JOB_COMPLETION_INDEX": "two"}, `JOB_COMPLETION_INDEX="two" is not a whole number`},
		{"auto/4", map[string]string{"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "1"}, "index 4 is out of range 0..3"},
		{"auto/4", map[string]string{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MIN": "a"}, `SLURM_ARRAY_TASK_MIN="a"`},
		{"auto/4", map[string]string{"SLURM_ARRAY_TASK_ID": "15", "SLURM_ARRAY_TASK_STEP": "10"}, "not on the array's step 10 from 0"},
		{"auto/4", map[string]string{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_STEP": "0"}, `SLURM_ARRAY_TASK_STEP="0"`},
	}
	for _, c := range cases {
		_, err := ParseShard(c.spec, envOf(c.env))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "jobs: shard ") {
			t.Errorf("ParseShard(%q, %v) error = %v, want %q", c.spec, c.env, err, c.want)
		}
	}
}

func TestParseShardDefaultsToProcessEnv(t *testing.T) {
	t.Setenv("JOB_COMPLETION_INDEX", "1")
	t.Setenv("SLURM_ARRAY_TASK_ID", "")
	got, err := ParseShard("auto/2", nil)
	if err != nil || got != (ShardSpec{1, 2}) {
		t.Errorf("got %v, %v", got, err)
	}
}
