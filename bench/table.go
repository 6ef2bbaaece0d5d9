package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable prints a report for people: where it was measured, then one
// row per length.
func WriteTable(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "%s\n", Headline(r))
	s := r.Settings
	runs := "1 run"
	if s.Repeats > 1 {
		runs = fmt.Sprintf("median of %d runs", s.Repeats)
	}
	fmt.Fprintf(w, "prefill: N random tokens from an empty state, chunks of %d, logits for the last; %s\n", s.Chunk, runs)
	fmt.Fprintf(w, "decode: %d single-token steps after N tokens (one untimed step first); %s\n\n", s.DecodeTokens, s.DecodeMethodIs)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "length\tprefill s\tprefill tok/s\tdecode ms/token\tdecode tok/s\t")
	for _, e := range r.Results {
		cells := []string{FormatLength(e.Length), "-", "-", "-", "-"}
		if p := e.Prefill; p != nil {
			cells[1], cells[2] = fmt.Sprintf("%.3f", p.Seconds), fmt.Sprintf("%.1f", p.TokensPerSecond)
		}
		if d := e.Decode; d != nil {
			cells[3], cells[4] = fmt.Sprintf("%.2f", 1e3*d.Seconds/float64(d.Tokens)), fmt.Sprintf("%.2f", d.TokensPerSecond)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}

// Headline is one line naming the model and the machine.
func Headline(r *Report) string {
	name := r.Model.Name
	if r.Model.Synthetic {
		name += " (synthetic weights)"
	}
	m := r.Machine
	where := fmt.Sprintf("%s on %s/%s", m.Backend, m.OS, m.Arch)
	if m.CPUModel != "" {
		where += ", " + m.CPUModel
	}
	return fmt.Sprintf("petal bench: %s, %s, %d CPUs, %s", name, where, m.CPUs, m.Date.Format("2006-01-02"))
}
