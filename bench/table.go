package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"petal/engine/sample"
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
	sampling := s.Sampling
	if sampling == "" {
		sampling = SamplingIs(sample.Params{})
	}
	fmt.Fprintf(w, "decode: %d single-token steps after N tokens (one untimed step first), each with %s; %s\n", s.DecodeTokens, sampling, s.DecodeMethodIs)
	if c := r.Ceilings; c != nil {
		fmt.Fprintln(w, c.Line())
		fmt.Fprintln(w, "% floor: prefill against matrix FLOPs per token over the matrix rate, decode against the bytes a token must read over the read bandwidth")
	}
	if r.LoadSeconds > 0 {
		fmt.Fprintf(w, "load: %.2f s (%s)\n", r.LoadSeconds, r.LoadIs)
	}
	if r.PeakDeviceBytes > 0 {
		fmt.Fprintf(w, "peak device memory in use: %.2f GiB (prefill GiB: in use right after each prompt, its state held)\n", float64(r.PeakDeviceBytes)/(1<<30))
	}
	fmt.Fprintln(w)
	floors, kernels, memory := r.Ceilings != nil, false, false
	for _, e := range r.Results {
		kernels = kernels || e.Decode != nil && e.Decode.KernelsPerToken > 0
		memory = memory || e.Prefill != nil && e.Prefill.DeviceBytes > 0
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', tabwriter.AlignRight)
	head := []string{"length", "prefill s", "prefill tok/s"}
	if floors {
		head = append(head, "prefill % floor")
	}
	if memory {
		head = append(head, "prefill GiB")
	}
	head = append(head, "decode ms/token", "decode tok/s")
	if floors {
		head = append(head, "decode % floor")
	}
	if kernels {
		head = append(head, "kernels/token")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, e := range r.Results {
		cells := []string{FormatLength(e.Length)}
		p, d := e.Prefill, e.Decode
		switch {
		case p != nil:
			cells = append(cells, fmt.Sprintf("%.3f", p.Seconds), fmt.Sprintf("%.1f", p.TokensPerSecond))
		default:
			cells = append(cells, "-", "-")
		}
		if floors {
			cells = append(cells, percent(p != nil, func() float64 { return p.ShareOfFloor }))
		}
		if memory {
			cell := "-"
			if p != nil && p.DeviceBytes > 0 {
				cell = fmt.Sprintf("%.2f", float64(p.DeviceBytes)/(1<<30))
			}
			cells = append(cells, cell)
		}
		switch {
		case d != nil:
			cells = append(cells, fmt.Sprintf("%.2f", 1e3*d.Seconds/float64(d.Tokens)), fmt.Sprintf("%.2f", d.TokensPerSecond))
		default:
			cells = append(cells, "-", "-")
		}
		if floors {
			cells = append(cells, percent(d != nil, func() float64 { return d.ShareOfFloor }))
		}
		if kernels {
			cell := "-"
			if d != nil && d.KernelsPerToken > 0 {
				cell = fmt.Sprint(d.KernelsPerToken)
			}
			cells = append(cells, cell)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	return tw.Flush()
}

// percent is a share as "12.3", or "-" where there is none.
func percent(ok bool, share func() float64) string {
	if !ok || share() <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", 100*share())
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
