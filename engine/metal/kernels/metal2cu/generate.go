package main

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Kernel is one `kernel void` function of a .metal source.
type Kernel struct {
	Name   string
	Params []Param
}

// Param is a kernel parameter: a buffer (Buffer >= 0) or a position
// attribute (Position set).
type Param struct {
	Decl     string // the declaration without its attribute
	Name     string
	Buffer   int
	Position string
	Vector   bool // a uint2 position (x and y)
}

// positions maps each supported position attribute to its CUDA value
// (one-dimensional grids only).
var positions = map[string]string{
	"thread_position_in_threadgroup": "__nvvm_read_ptx_sreg_tid_x()",
	"threadgroup_position_in_grid":   "__nvvm_read_ptx_sreg_ctaid_x()",
	"threads_per_threadgroup":        "__nvvm_read_ptx_sreg_ntid_x()",
	"threadgroups_per_grid":          "__nvvm_read_ptx_sreg_nctaid_x()",
	"thread_position_in_grid":        "(__nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x())",
	"threads_per_grid":               "(__nvvm_read_ptx_sreg_nctaid_x() * __nvvm_read_ptx_sreg_ntid_x())",
	"thread_index_in_simdgroup":      "(__nvvm_read_ptx_sreg_tid_x() & 31u)",
	"simdgroup_index_in_threadgroup": "(__nvvm_read_ptx_sreg_tid_x() >> 5)",
	"threads_per_simdgroup":          "32u",
	"simdgroups_per_threadgroup":     "((__nvvm_read_ptx_sreg_ntid_x() + 31u) >> 5)",
}

// positionsY are the y components of the attributes a kernel may declare
// as uint2 (two-dimensional grids: a threadgroup position and a thread
// position in the threadgroup, with their counts).
var positionsY = map[string]string{
	"thread_position_in_threadgroup": "__nvvm_read_ptx_sreg_tid_y()",
	"threadgroup_position_in_grid":   "__nvvm_read_ptx_sreg_ctaid_y()",
	"threads_per_threadgroup":        "__nvvm_read_ptx_sreg_ntid_y()",
	"threadgroups_per_grid":          "__nvvm_read_ptx_sreg_nctaid_y()",
}

// scalarPositionTypes are the declared types a position may have here.
var scalarPositionTypes = map[string]bool{"uint": true, "ushort": true, "int": true}

var (
	lineComment  = regexp.MustCompile(`//[^\n]*`)
	blockComment = regexp.MustCompile(`(?s)/\*.*?\*/`)
	kernelStart  = regexp.MustCompile(`\bkernel\s+void\s+([A-Za-z_]\w*)\s*\(`)
	attribute    = regexp.MustCompile(`^(.*?)\[\[\s*([A-Za-z_]\w*)\s*(?:\(\s*(\d+)\s*\))?\s*\]\]\s*$`)
	lastIdent    = regexp.MustCompile(`([A-Za-z_]\w*)\s*$`)
)

// Parse finds the kernels of src.
func Parse(src string) ([]Kernel, error) {
	src = blockComment.ReplaceAllStringFunc(src, func(s string) string { return strings.Repeat("\n", strings.Count(s, "\n")) })
	src = lineComment.ReplaceAllString(src, "")
	var kernels []Kernel
	for _, m := range kernelStart.FindAllStringSubmatchIndex(src, -1) {
		name := src[m[2]:m[3]]
		line := strings.Count(src[:m[0]], "\n") + 1
		depth, end := 1, -1
		for i := m[1]; i < len(src) && end < 0; i++ {
			switch src[i] {
			case '(':
				depth++
			case ')':
				if depth--; depth == 0 {
					end = i
				}
			}
		}
		if end < 0 {
			return nil, fmt.Errorf("line %d: kernel %s: no closing parenthesis", line, name)
		}
		k := Kernel{Name: name}
		for _, raw := range splitTop(src[m[1]:end]) {
			p, err := parseParam(strings.Join(strings.Fields(raw), " "))
			if err != nil {
				return nil, fmt.Errorf("line %d: kernel %s: %v", line, name, err)
			}
			k.Params = append(k.Params, p)
		}
		if err := checkBuffers(k); err != nil {
			return nil, fmt.Errorf("line %d: kernel %s: %v", line, name, err)
		}
		kernels = append(kernels, k)
	}
	if len(kernels) == 0 {
		return nil, fmt.Errorf("no kernel functions")
	}
	return kernels, nil
}

// splitTop splits a parameter list at its top-level commas.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(', '<', '[':
			depth++
		case ')', '>', ']':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	if strings.TrimSpace(s[start:]) != "" {
		parts = append(parts, s[start:])
	}
	return parts
}

func parseParam(s string) (Param, error) {
	m := attribute.FindStringSubmatch(s)
	if m == nil {
		return Param{}, fmt.Errorf("parameter %q has no [[...]] attribute (give every buffer its index)", s)
	}
	decl, attr := strings.TrimSpace(m[1]), m[2]
	id := lastIdent.FindStringSubmatch(decl)
	if id == nil {
		return Param{}, fmt.Errorf("parameter %q has no name", s)
	}
	p := Param{Decl: decl, Name: id[1], Buffer: -1}
	typ := strings.TrimSpace(strings.TrimSuffix(decl, id[1]))
	switch {
	case attr == "buffer":
		if m[3] == "" {
			return Param{}, fmt.Errorf("parameter %s: [[buffer]] without an index", p.Name)
		}
		p.Buffer, _ = strconv.Atoi(m[3])
		if !strings.HasSuffix(typ, "*") && !strings.HasSuffix(typ, "&") {
			return Param{}, fmt.Errorf("parameter %s: a buffer must be a pointer or a constant reference", p.Name)
		}
		if strings.HasSuffix(typ, "&") && !strings.HasPrefix(typ, "constant ") {
			return Param{}, fmt.Errorf("parameter %s: only constant references are supported", p.Name)
		}
	case positions[attr] != "":
		switch {
		case scalarPositionTypes[typ]:
		case typ == "uint2" && positionsY[attr] != "":
			p.Vector = true
		case typ == "uint2":
			return Param{}, fmt.Errorf("parameter %s: [[%s]] must be a uint, ushort or int (only thread and threadgroup positions and their counts may be uint2)", p.Name, attr)
		default:
			return Param{}, fmt.Errorf("parameter %s: [[%s]] must be a uint, ushort or int here (one-dimensional grids), or a uint2 for a thread or threadgroup position or count, not %q", p.Name, attr, typ)
		}
		p.Position = attr
	case attr == "threadgroup":
		return Param{}, fmt.Errorf("parameter %s: [[threadgroup(n)]] buffers are not supported: declare threadgroup arrays at kernel scope", p.Name)
	default:
		return Param{}, fmt.Errorf("parameter %s: unknown attribute [[%s]]", p.Name, attr)
	}
	return p, nil
}

// checkBuffers: buffer indices are 0..n-1, each once, in any order.
func checkBuffers(k Kernel) error {
	var idx []int
	for _, p := range k.Params {
		if p.Buffer >= 0 {
			idx = append(idx, p.Buffer)
		}
	}
	sort.Ints(idx)
	for i, b := range idx {
		if b != i {
			return fmt.Errorf("buffer indices %v are not 0..%d, each once", idx, len(idx)-1)
		}
	}
	if len(idx) > 31 {
		return fmt.Errorf("%d buffers, more than Metal's 31", len(idx))
	}
	// The host binds the buffers at 0..n-2 and the parameter struct after
	// them (engine/metal/device's Dispatch).
	for _, p := range k.Params {
		if p.Buffer >= 0 && strings.HasSuffix(strings.TrimSpace(strings.TrimSuffix(p.Decl, p.Name)), "&") && p.Buffer != len(idx)-1 {
			return fmt.Errorf("parameter %s: the constant parameter struct must take the last buffer index, %d", p.Name, len(idx)-1)
		}
	}
	return nil
}

// Generate returns the .cu file for the .metal source src named file.
func Generate(file, src string) (string, error) {
	kernels, err := Parse(src)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// Code generated by metal2cu from %s; DO NOT EDIT.\n", file)
	b.WriteString("// Compile with -I engine/metal/kernels/cuda (the dialect header) and\n// -I engine/metal/kernels (the sources): see cuda.sh.\n")
	b.WriteString("#include <metal_stdlib>\n")
	for _, k := range kernels {
		fmt.Fprintf(&b, "#define %s metal_%s\n", k.Name, k.Name)
	}
	fmt.Fprintf(&b, "#pragma clang force_cuda_host_device begin\n#include \"%s\"\n#pragma clang force_cuda_host_device end\n", file)
	for _, k := range kernels {
		fmt.Fprintf(&b, "#undef %s\n", k.Name)
	}
	for _, k := range kernels {
		buffers := make([]Param, 0, len(k.Params))
		for _, p := range k.Params {
			if p.Buffer >= 0 {
				buffers = append(buffers, p)
			}
		}
		sort.Slice(buffers, func(i, j int) bool { return buffers[i].Buffer < buffers[j].Buffer })
		var decls []string
		for _, p := range buffers {
			d := p.Decl
			if strings.HasPrefix(d, "constant ") && strings.Contains(d, "&") {
				// The parameter struct, passed by value as a kernel argument.
				d = strings.Replace(strings.TrimPrefix(d, "constant "), "&", "", 1)
			}
			decls = append(decls, d)
		}
		var args []string
		for _, p := range k.Params {
			if p.Vector {
				args = append(args, "petal_uint2("+positions[p.Position]+", "+positionsY[p.Position]+")")
			} else if p.Position != "" {
				args = append(args, positions[p.Position])
			} else {
				args = append(args, p.Name)
			}
		}
		fmt.Fprintf(&b, "\nextern \"C\" __attribute__((__global__)) void %s(%s) {\n  metal_%s(%s);\n}\n",
			k.Name, strings.Join(decls, ", "), k.Name, strings.Join(args, ", "))
	}
	return b.String(), nil
}
