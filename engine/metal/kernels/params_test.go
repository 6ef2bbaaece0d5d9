package kernels

import (
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// goParams are the Go twins of params.h, by struct name.
var goParams = map[string]reflect.Type{
	"QmvParams":          reflect.TypeFor[QmvParams](),
	"QmvGroupParams":     reflect.TypeFor[QmvGroupParams](),
	"RouteParams":        reflect.TypeFor[RouteParams](),
	"RouteNormParams":    reflect.TypeFor[RouteNormParams](),
	"GdnParams":          reflect.TypeFor[GdnParams](),
	"QKPrepParams":       reflect.TypeFor[QKPrepParams](),
	"AttnSplitParams":    reflect.TypeFor[AttnSplitParams](),
	"AttnCombineParams":  reflect.TypeFor[AttnCombineParams](),
	"MoeUpParams":        reflect.TypeFor[MoeUpParams](),
	"MoeDownParams":      reflect.TypeFor[MoeDownParams](),
	"QShape":             reflect.TypeFor[QShape](),
	"NormParams":         reflect.TypeFor[NormParams](),
	"GemmParams":         reflect.TypeFor[GemmParams](),
	"ConvParams":         reflect.TypeFor[ConvParams](),
	"DeltaParams":        reflect.TypeFor[DeltaParams](),
	"GatedNormParams":    reflect.TypeFor[GatedNormParams](),
	"QKPrepRowsParams":   reflect.TypeFor[QKPrepRowsParams](),
	"AttnRowsParams":     reflect.TypeFor[AttnRowsParams](),
	"RouteRowsParams":    reflect.TypeFor[RouteRowsParams](),
	"ExpertsParams":      reflect.TypeFor[ExpertsParams](),
	"AdvanceParams":      reflect.TypeFor[AdvanceParams](),
	"ConvertParams":      reflect.TypeFor[ConvertParams](),
	"SampleParams":       reflect.TypeFor[SampleParams](),
	"LogprobsParams":     reflect.TypeFor[LogprobsParams](),
	"MmaCheckParams":     reflect.TypeFor[MmaCheckParams](),
	"GemmDenseParams":    reflect.TypeFor[GemmDenseParams](),
	"GemmGroupParams":    reflect.TypeFor[GemmGroupParams](),
	"MoeRouteParams":     reflect.TypeFor[MoeRouteParams](),
	"MoeCombineParams":   reflect.TypeFor[MoeCombineParams](),
	"SharedSwigluParams": reflect.TypeFor[SharedSwigluParams](),
}

var cTypes = map[string]reflect.Kind{"int": reflect.Int32, "uint": reflect.Uint32, "float": reflect.Float32}

type cStruct struct {
	fields   [][2]string // type, name
	size     int         // from PETAL_LAYOUT, -1 if none
	offsets  map[string]int
	hasSizes bool
}

var (
	structRE = regexp.MustCompile(`(?s)struct\s+(\w+)\s*\{(.*?)\};`)
	fieldRE  = regexp.MustCompile(`^\s*(\w+)\s+(\w+)\s*;\s*$`)
	layoutRE = regexp.MustCompile(`PETAL_LAYOUT\((\w+),\s*(\d+)\)`)
	offRE    = regexp.MustCompile(`PETAL_FIELD\((\w+),\s*(\w+),\s*(\d+)\)`)
)

// parseParams reads the structs of params.h with their asserted sizes and
// offsets.
func parseParams(t *testing.T, src string) map[string]*cStruct {
	t.Helper()
	out := map[string]*cStruct{}
	for _, m := range structRE.FindAllStringSubmatch(src, -1) {
		s := &cStruct{size: -1, offsets: map[string]int{}}
		for _, line := range strings.Split(m[2], "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			f := fieldRE.FindStringSubmatch(line)
			if f == nil {
				t.Fatalf("params.h: struct %s: cannot read field %q (one `type name;` a line)", m[1], line)
			}
			s.fields = append(s.fields, [2]string{f[1], f[2]})
		}
		out[m[1]] = s
	}
	for _, m := range layoutRE.FindAllStringSubmatch(src, -1) {
		if s := out[m[1]]; s != nil {
			s.size, _ = strconv.Atoi(m[2])
		}
	}
	for _, m := range offRE.FindAllStringSubmatch(src, -1) {
		if s := out[m[1]]; s != nil {
			s.offsets[m[2]], _ = strconv.Atoi(m[3])
		}
	}
	return out
}

// TestParamsMatchHeader: every struct of params.h has a Go twin with the
// same fields in the same order, of the same types, at the same offsets,
// of the size the header asserts; and every Go twin is in the header.
func TestParamsMatchHeader(t *testing.T) {
	src, err := os.ReadFile("params.h")
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range compareParams(parseParams(t, string(src)), goParams) {
		t.Error(msg)
	}
}

func compareParams(header map[string]*cStruct, twins map[string]reflect.Type) []string {
	var errs []string
	for name := range twins {
		if header[name] == nil {
			errs = append(errs, "params.go has "+name+", params.h does not")
		}
	}
	for name, s := range header {
		gt, ok := twins[name]
		if !ok {
			errs = append(errs, "params.h has "+name+" with no Go twin in params.go")
			continue
		}
		if s.size < 0 {
			errs = append(errs, "params.h: "+name+" has no PETAL_LAYOUT size assertion")
		} else if int(gt.Size()) != s.size {
			errs = append(errs, name+": Go size "+strconv.Itoa(int(gt.Size()))+", params.h asserts "+strconv.Itoa(s.size))
		}
		if gt.NumField() != len(s.fields) {
			errs = append(errs, name+": "+strconv.Itoa(gt.NumField())+" Go fields, "+strconv.Itoa(len(s.fields))+" in params.h")
			continue
		}
		for i, f := range s.fields {
			gf := gt.Field(i)
			if !strings.EqualFold(gf.Name, f[1]) {
				errs = append(errs, name+": field "+strconv.Itoa(i)+" is "+gf.Name+" in Go, "+f[1]+" in params.h")
			}
			if k, ok := cTypes[f[0]]; !ok || gf.Type.Kind() != k {
				errs = append(errs, name+"."+f[1]+": "+f[0]+" in params.h, "+gf.Type.String()+" in Go (int, uint, float are int32, uint32, float32)")
			}
			if int(gf.Offset) != 4*i {
				errs = append(errs, name+"."+f[1]+": Go offset "+strconv.Itoa(int(gf.Offset)))
			}
			if off, ok := s.offsets[f[1]]; ok && off != int(gf.Offset) {
				errs = append(errs, name+"."+f[1]+": params.h asserts offset "+strconv.Itoa(off)+", Go has "+strconv.Itoa(int(gf.Offset)))
			}
		}
	}
	return errs
}

// TestCompareParamsCatches: a field missing on the Go side, a type changed
// and a wrong asserted size are each reported.
func TestCompareParamsCatches(t *testing.T) {
	header := parseParams(t, "struct QmvParams {\n  int rows;\n  float cols;\n  int team;\n  int extra;\n};\nPETAL_LAYOUT(QmvParams, 12);\n")
	errs := strings.Join(compareParams(header, map[string]reflect.Type{"QmvParams": goParams["QmvParams"]}), "\n")
	if !strings.Contains(errs, "3 Go fields, 4 in params.h") {
		t.Errorf("an extra header field was not reported:\n%s", errs)
	}
	header = parseParams(t, "struct QmvParams {\n  int rows;\n  float cols;\n  int team;\n};\nPETAL_LAYOUT(QmvParams, 16);\n")
	errs = strings.Join(compareParams(header, map[string]reflect.Type{"QmvParams": goParams["QmvParams"]}), "\n")
	for _, want := range []string{"QmvParams.cols: float in params.h, int32 in Go", "Go size 12, params.h asserts 16"} {
		if !strings.Contains(errs, want) {
			t.Errorf("missing %q in:\n%s", want, errs)
		}
	}
}
