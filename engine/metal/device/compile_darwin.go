//go:build darwin

package device

import (
	"fmt"
	"sync"
)

// Library is a compiled MSL library and the pipelines made from it, each
// made once.
type Library struct {
	// Language and Math are what Metal reports for the compile, read back
	// from the options after setting them.
	Language LanguageVersion
	Math     MathMode
	Warnings string

	obj       id
	dev       id
	mu        sync.Mutex
	pipelines map[string]*Pipeline
}

// Compile compiles MSL source with the language version and math mode
// given, and fails if Metal reports either differently than asked.
func (d *Device) Compile(source string, opt CompileOptions) (*Library, error) {
	if opt.Language == 0 {
		return nil, fmt.Errorf("metal: compile options need a language version (a binary built without cgo gets an old default)")
	}
	lib := &Library{dev: d.dev, pipelines: map[string]*Pipeline{}}
	err := withPool(func() error {
		o := msg.New.call(classCompileOptions, msg.New.sel)
		if o == 0 {
			return fmt.Errorf("metal: could not make MTLCompileOptions")
		}
		defer release(&o)
		msg.SetLanguageVersion.call(o, msg.SetLanguageVersion.sel, uint64(opt.Language))
		lib.Language = LanguageVersion(msg.LanguageVersion.call(o, msg.LanguageVersion.sel))
		if lib.Language != opt.Language {
			return fmt.Errorf("metal: asked for MSL %s, the compiler options report %s (this macOS may be too old)", opt.Language, lib.Language)
		}
		if msg.RespondsToSelector.call(o, msg.RespondsToSelector.sel, msg.SetMathMode.sel) {
			msg.SetMathMode.call(o, msg.SetMathMode.sel, int64(opt.Math))
			lib.Math = MathMode(msg.MathMode.call(o, msg.MathMode.sel))
		} else {
			// Before macOS 15 there is only the fast-math switch.
			if opt.Math == MathRelaxed {
				return fmt.Errorf("metal: relaxed math needs macOS 15 or newer (no setMathMode:)")
			}
			msg.SetFastMathEnabled.call(o, msg.SetFastMathEnabled.sel, opt.Math == MathFast)
			lib.Math = MathSafe
			if msg.FastMathEnabled.call(o, msg.FastMathEnabled.sel) {
				lib.Math = MathFast
			}
		}
		if lib.Math != opt.Math {
			return fmt.Errorf("metal: asked for %s math, the compiler options report %s", opt.Math, lib.Math)
		}
		src := nsString(source)
		defer release(&src)
		var errObj id
		lib.obj = msg.NewLibrary.call(d.dev, msg.NewLibrary.sel, src, o, &errObj)
		if lib.obj == 0 {
			return fmt.Errorf("metal: MSL did not compile: %s", errorText(errObj))
		}
		if errObj != 0 {
			lib.Warnings = errorText(errObj)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return lib, nil
}

// Pipeline is a compute pipeline: one kernel of a library.
type Pipeline struct {
	Name                    string
	MaxThreads              uint64 // maxTotalThreadsPerThreadgroup
	SIMDWidth               uint64 // threadExecutionWidth
	StaticThreadgroupMemory uint64
	obj                     id
}

// Pipeline returns the pipeline of kernel name, made on first use.
func (l *Library) Pipeline(name string) (*Pipeline, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.pipelines[name]; ok {
		return p, nil
	}
	p := &Pipeline{Name: name}
	err := withPool(func() error {
		n := nsString(name)
		defer release(&n)
		fn := msg.NewFunction.call(l.obj, msg.NewFunction.sel, n)
		if fn == 0 {
			return fmt.Errorf("metal: the library has no kernel %q", name)
		}
		defer release(&fn)
		var errObj id
		p.obj = msg.NewPipeline.call(l.dev, msg.NewPipeline.sel, fn, &errObj)
		if p.obj == 0 {
			return fmt.Errorf("metal: no pipeline for kernel %q: %s", name, errorText(errObj))
		}
		p.MaxThreads = msg.MaxThreadsPerGroup.call(p.obj, msg.MaxThreadsPerGroup.sel)
		p.SIMDWidth = msg.ThreadExecutionWidth.call(p.obj, msg.ThreadExecutionWidth.sel)
		p.StaticThreadgroupMemory = msg.StaticThreadgroupMemory.call(p.obj, msg.StaticThreadgroupMemory.sel)
		return nil
	})
	if err != nil {
		return nil, err
	}
	l.pipelines[name] = p
	return p, nil
}

// Release releases the pipelines and the library.
func (l *Library) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.pipelines {
		release(&p.obj)
	}
	l.pipelines = map[string]*Pipeline{}
	release(&l.obj)
}
