//go:build darwin

package device

import "fmt"

// SelectorResult is whether the object a message is sent to responds to
// its selector on this Mac.
type SelectorResult struct {
	Selector string
	On       string // the receiver, as the message table names it
	Optional bool   // only newer macOS has it; petal asks before sending it
	Responds bool
}

// selectorProbe is a kernel for the pipeline, command buffer and encoder
// CheckSelectors asks.
const selectorProbe = `#include <metal_stdlib>
using namespace metal;
kernel void petal_selector_probe(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = 1.0f; }
`

// CheckSelectors asks, for every message of the table, the object it is
// sent to whether it responds to the selector (respondsToSelector:; for
// NSError, which petal only meets as a result, its class's instances).
// It makes one of each receiver to ask: a buffer, an NSString, compile
// options, a library, a pipeline, a command buffer and an encoder (ended,
// never committed).
func (d *Device) CheckSelectors() ([]SelectorResult, error) {
	lib, err := d.Compile(selectorProbe, CompileOptions{Language: MSL31, Math: MathSafe})
	if err != nil {
		return nil, err
	}
	defer lib.Release()
	p, err := lib.Pipeline("petal_selector_probe")
	if err != nil {
		return nil, err
	}
	buf, err := d.NewBuffer(16)
	if err != nil {
		return nil, err
	}
	defer buf.Release()
	var out []SelectorResult
	err = withPool(func() error {
		str := nsString("petal")
		defer release(&str)
		opts := msg.New.call(classCompileOptions, msg.New.sel)
		defer release(&opts)
		name := nsString("petal_selector_probe")
		defer release(&name)
		fn := msg.NewFunction.call(lib.obj, msg.NewFunction.sel, name)
		defer release(&fn)
		cb := msg.CommandBuffer.call(d.queue, msg.CommandBuffer.sel) // autoreleased
		const concurrent = 1                                         // MTLDispatchTypeConcurrent
		enc := msg.ComputeEncoder.call(cb, msg.ComputeEncoder.sel, concurrent)
		if fn == 0 || cb == 0 || enc == 0 {
			return fmt.Errorf("metal: could not make the objects to check selectors on (function %v, command buffer %v, encoder %v)", fn != 0, cb != 0, enc != 0)
		}
		defer msg.EndEncoding.call(enc, msg.EndEncoding.sel)
		objects := map[string]id{
			"NSString class": classNSString, "MTLCompileOptions class": classCompileOptions, "NSError class": classNSError, "object": d.dev,
			"NSString": str, "device": d.dev, "buffer": buf.obj, "compile options": opts, "library": lib.obj,
			"pipeline": p.obj, "queue": d.queue, "command buffer": cb, "encoder": enc,
		}
		names, msgs := messageTable()
		on, optional := messageReceivers()
		for i, name := range names {
			r := SelectorResult{Selector: name, On: on[i], Optional: optional[i]}
			s := msgs[i].selector()
			if on[i] == "NSError" {
				r.Responds = msg.InstancesRespond.call(classNSError, msg.InstancesRespond.sel, s)
			} else if obj := objects[on[i]]; obj != 0 {
				r.Responds = msg.RespondsToSelector.call(obj, msg.RespondsToSelector.sel, s)
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}
