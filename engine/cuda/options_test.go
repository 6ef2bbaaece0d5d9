package cuda

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"petal/engine/backend"
)

// TestParseOptionsChoices: the values of pdl and moe land in their fields,
// and a value outside a key's choices is refused with the key named.
func TestParseOptionsChoices(t *testing.T) {
	for _, c := range []struct {
		key, value string
		pdl, some  bool
		moe        MoEKernel
	}{
		{"pdl", "off", false, false, MoEWG}, {"pdl", "on", true, false, MoEWG}, {"pdl", "some", true, true, MoEWG},
		{"moe", "smem", true, false, MoESmem}, {"moe", "reg", true, false, MoEReg}, {"moe", "stream", true, false, MoEStream},
	} {
		o, err := ParseOptions([]backend.Option{{Key: c.key, Value: c.value}})
		if err != nil {
			t.Fatalf("%s=%s: %v", c.key, c.value, err)
		}
		if o.PDL != c.pdl || o.PDLSome != c.some || o.MoE != c.moe {
			t.Errorf("%s=%s: PDL %v, PDLSome %v, MoE %v", c.key, c.value, o.PDL, o.PDLSome, o.MoE)
		}
	}
	if d := DefaultOptions(); !d.PDL || d.PDLSome || d.MoE != MoEWG {
		t.Errorf("defaults: PDL %v, PDLSome %v, MoE %v; want pdl=on and moe=wg", d.PDL, d.PDLSome, d.MoE)
	}
	for v, want := range map[string]bool{"group": true, "apart": false} {
		if o, err := ParseOptions([]backend.Option{{Key: "linears", Value: v}}); err != nil || o.GroupGEMM != want {
			t.Errorf("linears=%s: GroupGEMM %v, %v; want %v", v, o.GroupGEMM, err, want)
		}
	}
	for v, want := range map[string][2]bool{"on": {true, false}, "off": {false, false}, "all": {true, true}} {
		if o, err := ParseOptions([]backend.Option{{Key: "splitk", Value: v}}); err != nil || o.SplitK != want[0] || o.SplitKGroups != want[1] {
			t.Errorf("splitk=%s: SplitK %v, SplitKGroups %v, %v; want %v", v, o.SplitK, o.SplitKGroups, err, want)
		}
	}
	if d := DefaultOptions(); !d.SplitK || !d.SplitKGroups || !d.GroupGEMM || !d.FlashWide {
		t.Errorf("defaults: SplitK %v, SplitKGroups %v, GroupGEMM %v, FlashWide %v; want splitk=all, linears=group, attn=wg (wide's blocks)", d.SplitK, d.SplitKGroups, d.GroupGEMM, d.FlashWide)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "router", Value: "f64d"}}); err == nil {
		t.Errorf("router=f64d: took %v, want an error (removed after measurement)", o.Router)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "gdnnorm", Value: "ticket"}}); err != nil || o.GDNCluster || !DefaultOptions().GDNCluster {
		t.Errorf("gdnnorm=ticket: %v (%v); the default %v, want cluster", o.GDNCluster, err, DefaultOptions().GDNCluster)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "delta", Value: "cluster"}}); err == nil {
		t.Errorf("delta=cluster: took %+v, want an error (removed after measurement)", o)
	}
	for _, v := range []string{"i8t", "i8n", "i8g"} {
		if _, err := ParseOptions([]backend.Option{{Key: "router", Value: v}}); err == nil || !strings.Contains(err.Error(), "removed after measurement") {
			t.Errorf("router=%s: %v, want an error saying it was removed", v, err)
		}
	}
	if d := DefaultOptions(); d.Router != RouterI8WG || !d.MoEFit || d.MoEFitAll || !d.MoEFitWidth {
		t.Errorf("defaults: router %v, moefit %v, all %v, width %v; want router=i8wg, moefit=width", d.Router, d.MoEFit, d.MoEFitAll, d.MoEFitWidth)
	}
	for v, want := range map[string][2]bool{"on": {true, false}, "true": {true, false}, "moe": {true, true}, "off": {false, false}, "0": {false, false}} {
		if o, err := ParseOptions([]backend.Option{{Key: "normbf", Value: v}}); err != nil || [2]bool{o.NormBF16, o.NormBF16MoE} != want {
			t.Errorf("normbf=%s: %v %v (%v), want %v", v, o.NormBF16, o.NormBF16MoE, err, want)
		}
	}
	if _, err := ParseOptions([]backend.Option{{Key: "normbf", Value: "all"}}); err == nil || !strings.Contains(err.Error(), "want on, moe or off") {
		t.Errorf("normbf=all: %v, want an error naming the values", err)
	}
	for _, kvs := range [][]backend.Option{{{Key: "deltaflow", Value: "on"}}, {{Key: "delta", Value: "tf32frag"}, {Key: "deltaflow", Value: "on"}}} {
		if o, err := ParseOptions(kvs); err != nil || !o.DeltaFlow {
			t.Errorf("%v: deltaflow %v (%v), want on", kvs, o.DeltaFlow, err)
		}
	}
	for _, kvs := range [][]backend.Option{{{Key: "deltaflow", Value: "on"}, {Key: "delta", Value: "chunked"}}, {{Key: "delta", Value: "tf32"}, {Key: "deltaflow", Value: "on"}}} {
		if _, err := ParseOptions(kvs); err == nil || !strings.Contains(err.Error(), "deltaflow=on takes delta=tf32frag") {
			t.Errorf("%v: %v, want an error naming what deltaflow takes", kvs, err)
		}
	}
	if _, err := ParseOptions([]backend.Option{{Key: "deltaflow", Value: "some"}}); err == nil || !strings.Contains(err.Error(), "want on, pair or off") {
		t.Errorf("deltaflow=some: %v, want an error naming deltaflow's values", err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "deltaflow", Value: "pair"}}); err != nil || !o.DeltaFlow || !o.DeltaFlowPair {
		t.Errorf("deltaflow=pair: flow %v, pair %v (%v), want both", o.DeltaFlow, o.DeltaFlowPair, err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "deltaflow", Value: "pair"}, {Key: "deltaflow", Value: "on"}}); err != nil || !o.DeltaFlow || o.DeltaFlowPair {
		t.Errorf("deltaflow=pair then on: flow %v, pair %v (%v), want flow alone", o.DeltaFlow, o.DeltaFlowPair, err)
	}
	for v, want := range map[string]bool{"on": true, "off": false} {
		if o, err := ParseOptions([]backend.Option{{Key: "combinenorm", Value: v}}); err != nil || o.CombineNorm != want {
			t.Errorf("combinenorm=%s: %v (%v), want %v", v, o.CombineNorm, err, want)
		}
	}
	if DefaultOptions().CombineNorm {
		t.Error("defaults: combinenorm on, want off")
	}
	for v, want := range map[string]bool{"on": true, "off": false} {
		if o, err := ParseOptions([]backend.Option{{Key: "deltapair", Value: v}}); err != nil || o.DeltaPair != want {
			t.Errorf("deltapair=%s: %v (%v), want %v", v, o.DeltaPair, err, want)
		}
	}
	for _, kvs := range [][]backend.Option{{{Key: "deltapair", Value: "on"}, {Key: "deltaflow", Value: "on"}}, {{Key: "delta", Value: "tf32"}, {Key: "deltapair", Value: "on"}}} {
		if _, err := ParseOptions(kvs); err == nil || !strings.Contains(err.Error(), "deltapair=on takes delta=tf32frag with deltaflow=off") {
			t.Errorf("%v: %v, want an error naming what deltapair takes", kvs, err)
		}
	}
	for v, want := range map[string]bool{"on": true, "off": false} {
		if o, err := ParseOptions([]backend.Option{{Key: "sharedside", Value: v}}); err != nil || o.SharedSide != want {
			t.Errorf("sharedside=%s: %v (%v), want %v", v, o.SharedSide, err, want)
		}
	}
	if DefaultOptions().SharedSide {
		t.Error("defaults: sharedside on, want off")
	}
	for v, want := range map[string]bool{"on": true, "off": false} {
		o, err := ParseOptions([]backend.Option{{Key: "convgemm", Value: v}})
		if err != nil || o.ConvGEMM != want {
			t.Errorf("convgemm=%s: %v (%v), want %v", v, o.ConvGEMM, err, want)
		}
		if on := slices.Contains(noticeFamilies(o), "gemm_conv"); on != want {
			t.Errorf("convgemm=%s: gemm_conv among the families %v, want %v", v, on, want)
		}
	}
	if DefaultOptions().ConvGEMM {
		t.Error("defaults: convgemm on, want off")
	}
	if o, err := ParseOptions([]backend.Option{{Key: "router", Value: "cert"}}); err != nil || !slices.Contains(noticeFamilies(o), "route_cert") || !slices.Contains(noticeFamilies(o), "route_i8w") {
		t.Errorf("router=cert: families %v (%v), want route_cert and route_i8w (its fallback) among them", noticeFamilies(o), err)
	}
	if slices.Contains(noticeFamilies(DefaultOptions()), "route_cert") {
		t.Error("the defaults load route_cert")
	}
	if !DefaultOptions().DeltaPair {
		t.Error("defaults: deltapair off, want on")
	}
	// by default it gives way where its prep is not the one run
	for _, kvs := range [][]backend.Option{{{Key: "deltaflow", Value: "on"}}, {{Key: "delta", Value: "tf32"}}, {{Key: "delta", Value: "sequential"}}} {
		if o, err := ParseOptions(kvs); err != nil || o.DeltaPair {
			t.Errorf("%v: deltapair %v (%v), want off and no error", kvs, o.DeltaPair, err)
		}
	}
	if d := DefaultOptions(); d.DeltaFlow {
		t.Error("defaults: deltaflow on, want off")
	}
	for v, want := range map[string]bool{"lean": true, "full": false} {
		if o, err := ParseOptions([]backend.Option{{Key: "normf32", Value: v}}); err != nil || o.NormF32Lean != want {
			t.Errorf("normf32=%s: %v (%v), want %v", v, o.NormF32Lean, err, want)
		}
	}
	if _, err := ParseOptions([]backend.Option{{Key: "normf32", Value: "on"}}); err == nil || !strings.Contains(err.Error(), "want lean or full") {
		t.Errorf("normf32=on: %v, want an error naming the values", err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "attnprep", Value: "on"}}); err == nil || !strings.Contains(err.Error(), "removed after measurement") {
		t.Errorf("attnprep=on: took %+v, %v; want an error saying it was removed after measurement", o, err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "attnprep", Value: "off"}}); err != nil || !reflect.DeepEqual(o, DefaultOptions()) {
		t.Errorf("attnprep=off: %+v, %v; want the defaults", o, err)
	}
	if strings.Contains(OptionsHelp, "attnprep") {
		t.Error("the options' help lists attnprep, which has one form left")
	}
	if d := DefaultOptions(); !d.NormF32Lean {
		t.Error("the default is normf32=lean")
	}
	if d := DefaultOptions(); !d.NormBF16 || !d.NormBF16MoE {
		t.Errorf("defaults: normbf %v, moe %v; want normbf=moe", d.NormBF16, d.NormBF16MoE)
	}
	for v, want := range map[string][3]bool{"on": {true, false, false}, "all": {true, true, false}, "width": {true, false, true}, "off": {false, false, false}} {
		if o, err := ParseOptions([]backend.Option{{Key: "moefit", Value: v}}); err != nil || [3]bool{o.MoEFit, o.MoEFitAll, o.MoEFitWidth} != want {
			t.Errorf("moefit=%s: %v %v %v (%v), want %v", v, o.MoEFit, o.MoEFitAll, o.MoEFitWidth, err, want)
		}
	}
	if _, err := ParseOptions([]backend.Option{{Key: "moefit", Value: "wide"}}); err == nil || !strings.Contains(err.Error(), "want on, all, width or off") {
		t.Errorf("moefit=wide: %v, want an error naming the values", err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "sampler", Value: "row"}}); err != nil || o.SamplerTopK || !DefaultOptions().SamplerTopK {
		t.Errorf("sampler=row: topk %v (%v); the default: topk %v, want topk", o.SamplerTopK, err, DefaultOptions().SamplerTopK)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "gemm", Value: "wgrs"}}); err != nil || !o.WGRegA || !o.WGUndrained || !o.WGProducer || o.WGThree || DefaultOptions().WGProducer {
		t.Errorf("gemm=wgrs: WGRegA %v, WGUndrained %v, WGProducer %v (default %v), %v", o.WGRegA, o.WGUndrained, o.WGProducer, DefaultOptions().WGProducer, err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "gemm", Value: "wgr3"}}); err != nil || !o.WGRegA || !o.WGUndrained || !o.WGThree || o.WGProducer || DefaultOptions().WGThree {
		t.Errorf("gemm=wgr3: WGRegA %v, WGUndrained %v, WGThree %v (default %v), %v", o.WGRegA, o.WGUndrained, o.WGThree, DefaultOptions().WGThree, err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "gemm", Value: "wgr"}}); err != nil || !o.WGRegA || o.WGUndrained {
		t.Errorf("gemm=wgr: WGRegA %v, WGUndrained %v, %v", o.WGRegA, o.WGUndrained, err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "gemm", Value: "wgrp"}}); err != nil || !o.WGRegA || !o.WGUndrained {
		t.Errorf("gemm=wgrp: WGRegA %v, WGUndrained %v, %v", o.WGRegA, o.WGUndrained, err)
	}
	for v, want := range map[string][3]bool{"wg": {true, true, false}, "wgr": {true, true, true}, "tc": {true, false, false}, "plain": {false, false, false}} {
		if o, err := ParseOptions([]backend.Option{{Key: "gemm", Value: v}}); err != nil || [3]bool{o.TensorCores, o.WGMMA, o.WGRegA} != want {
			t.Errorf("gemm=%s: TensorCores %v, WGMMA %v, WGRegA %v, %v; want %v", v, o.TensorCores, o.WGMMA, o.WGRegA, err, want)
		}
	}
	if d := DefaultOptions(); !d.TensorCores || !d.WGMMA || !d.WGRegA {
		t.Errorf("defaults: TensorCores %v, WGMMA %v, WGRegA %v; want gemm=wgr", d.TensorCores, d.WGMMA, d.WGRegA)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "kvshadow", Value: "off"}}); err != nil || o.KVShadow || !DefaultOptions().KVShadow {
		t.Errorf("kvshadow=off: KVShadow %v (%v); the default %v, want on", o.KVShadow, err, DefaultOptions().KVShadow)
	}
	for _, kv := range [][2]string{{"pdl", "all"}, {"moe", "fast"}, {"linears", "one"}, {"splitk", "some"}, {"gemm", "fast"}, {"kvshadow", "yes"}} {
		_, err := ParseOptions([]backend.Option{{Key: kv[0], Value: kv[1]}})
		if err == nil || !strings.Contains(err.Error(), kv[0]+"=") {
			t.Errorf("%s=%s: error %v, want one naming %s=", kv[0], kv[1], err, kv[0])
		}
	}
}

// TestParseMoELayer: moelayer=one and three choose the MoE block of a
// decoded token in one launch or in three; three is the default (one was
// slower on the H200, docs/bench/cuda 2026-12-03); another value is refused
// naming the option.
func TestParseMoELayer(t *testing.T) {
	for value, want := range map[string]bool{"one": true, "three": false} {
		o, err := ParseOptions([]backend.Option{{Key: "moelayer", Value: value}})
		if err != nil {
			t.Fatalf("moelayer=%s: %v", value, err)
		}
		if o.MoELayer != want {
			t.Errorf("moelayer=%s: MoELayer %v", value, o.MoELayer)
		}
	}
	if DefaultOptions().MoELayer {
		t.Error("the default is moelayer=one; want three")
	}
	if _, err := ParseOptions([]backend.Option{{Key: "moelayer", Value: "two"}}); err == nil || !strings.Contains(err.Error(), "moelayer") {
		t.Errorf("moelayer=two: error %v, want one naming moelayer", err)
	}
	if !strings.Contains(OptionsHelp, "moelayer=one|three") {
		t.Error("the options' help does not list moelayer")
	}
}

// TestParseRouteNorm: routenorm=cluster (route_cl.cu) was removed after
// fw4 measured its decode slower than the ticket form's, so asking for it
// is an error that says so; routenorm=ticket, the only form, is still
// taken and changes nothing; another value is refused naming the option;
// the help no longer lists routenorm.
func TestParseRouteNorm(t *testing.T) {
	if o, err := ParseOptions([]backend.Option{{Key: "routenorm", Value: "cluster"}}); err == nil ||
		!strings.Contains(err.Error(), "routenorm=cluster") || !strings.Contains(err.Error(), "removed after measurement") {
		t.Errorf("routenorm=cluster: took %+v, %v; want an error saying it was removed after measurement", o, err)
	}
	if o, err := ParseOptions([]backend.Option{{Key: "routenorm", Value: "ticket"}}); err != nil || !reflect.DeepEqual(o, DefaultOptions()) {
		t.Errorf("routenorm=ticket: %+v, %v; want the defaults", o, err)
	}
	if _, err := ParseOptions([]backend.Option{{Key: "routenorm", Value: "grid"}}); err == nil || !strings.Contains(err.Error(), "routenorm=") {
		t.Errorf("routenorm=grid: error %v, want one naming routenorm", err)
	}
	if strings.Contains(OptionsHelp, "routenorm") {
		t.Error("the options' help lists routenorm, which has one form left")
	}
}

// TestSplitCounts: the split-K choices at the 35B model's shapes on 132
// multiprocessors: the best measured or within 5 % of it (2026-12-06-stream1,
// -split1; qkv at 16 rows 16.2 us in 8 against 15.9 in 4, the router at 64
// rows 26.4 in 16 against 25.2 in 8).
func TestSplitCounts(t *testing.T) {
	for _, c := range []struct {
		what                string
		tiles, ktiles, want int
	}{{"out_proj at 16 rows", 16, 64, 16}, {"in_proj z at 16 rows", 32, 32, 8}, {"in_proj qkv at 16 rows", 64, 32, 8},
		{"in_proj's group at 16 rows", 98, 32, 4}, {"shared down (8 k-tiles)", 16, 8, 1}, {"a full wave", 300, 64, 1}} {
		if got := denseSplits(c.tiles, c.ktiles, 132); got != c.want {
			t.Errorf("dense %s: %d splits, want %d", c.what, got, c.want)
		}
	}
	for _, c := range []struct {
		rows, want int
	}{{16, 16}, {64, 16}, {512, 4}, {1024, 2}, {4096, 1}} {
		if got := routerSplits(8*ceil(c.rows, 32), 32, 132); got != c.want {
			t.Errorf("router at %d rows: %d splits, want %d", c.rows, got, c.want)
		}
	}
	// the 64 x 64 kernel from 512 rows, its blocks counted twice: the best
	// measured (2026-12-06-pipe1: 4 splits at 1024 rows, 1 at 4096; router5:
	// 8 at 512)
	for _, c := range []struct {
		rows   int
		wide   bool
		splits int
	}{{64, false, 0}, {256, false, 0}, {512, true, 8}, {1024, true, 4}, {4096, true, 1}} {
		tiles64 := 4 * ceil(c.rows, 64)
		if got := routerWide(tiles64, 132); got != c.wide {
			t.Errorf("router at %d rows: wide %v, want %v", c.rows, got, c.wide)
		}
		if c.wide {
			if got := routerSplits(routerWideWeight*tiles64, 32, 132); got != c.splits {
				t.Errorf("router at %d rows, wide: %d splits, want %d", c.rows, got, c.splits)
			}
		}
	}
}
