package jobs

import (
	"encoding/json"

	"github.com/tidwall/gjson"
)

// ParamError is a sampling option refused by CheckParams: Param is the
// request field at fault (e.g. "top_p"), Message the reason as a job
// line's error would give it.
type ParamError struct {
	Param, Code, Message string
}

func (e *ParamError) Error() string { return e.Message }

// CheckParams validates sampling options given by their request-body names
// (max_tokens, temperature, stop, ...) with exactly the checks a job line's
// body goes through, so a command line that builds a job itself accepts
// and refuses what a batch line would.
func CheckParams(kind Kind, options map[string]any) (Params, *ParamError) {
	body, err := json.Marshal(options)
	if err != nil {
		return Params{}, &ParamError{Code: codeInvalidValue, Message: err.Error()}
	}
	p, ferr := decodeParams(objectFields(gjson.ParseBytes(body)), kind)
	if ferr != nil {
		return Params{}, &ParamError{Param: ferr.param, Code: ferr.code, Message: ferr.msg}
	}
	return p, nil
}
