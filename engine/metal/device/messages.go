package device

import (
	"reflect"
	"unsafe"

	"github.com/ebitengine/purego"
)

// id is an Objective-C object pointer; sel is a registered selector.
type id uintptr
type sel uintptr

// mtlSize is MTLSize (three NSUInteger), passed by value.
type mtlSize struct{ W, H, D uint64 }

// nsRange is NSRange, passed by value.
type nsRange struct{ Loc, Len uint64 }

// message is one Objective-C message petal sends: the selector (set at
// load) and objc_msgSend bound once to the typed Go function F, whose first
// two parameters are the receiver and the selector and whose others are the
// message's arguments, one per colon of the selector.
type message[F any] struct {
	sel  sel
	call F
}

type boundMessage interface {
	bind(s sel, msgSend uintptr)
	funcType() reflect.Type
}

func (m *message[F]) bind(s sel, msgSend uintptr) {
	m.sel = s
	purego.RegisterFunc(&m.call, msgSend)
}

func (m *message[F]) funcType() reflect.Type { return reflect.TypeFor[F]() }

// msg is the table of every message sent, each field tagged with its
// selector. load binds them all once; TestSelectorTable checks on every OS
// that each function takes one argument per colon.
var msg struct {
	Alloc                   message[func(id, sel) id]                                          `sel:"alloc"`
	New                     message[func(id, sel) id]                                          `sel:"new"`
	Retain                  message[func(id, sel) id]                                          `sel:"retain"`
	Release                 message[func(id, sel)]                                             `sel:"release"`
	RespondsToSelector      message[func(id, sel, sel) bool]                                   `sel:"respondsToSelector:"`
	InitWithBytes           message[func(id, sel, unsafe.Pointer, uint64, uint64) id]          `sel:"initWithBytes:length:encoding:"`
	UTF8String              message[func(id, sel) unsafe.Pointer]                              `sel:"UTF8String"`
	LocalizedDescription    message[func(id, sel) id]                                          `sel:"localizedDescription"`
	Name                    message[func(id, sel) id]                                          `sel:"name"`
	MaxBufferLength         message[func(id, sel) uint64]                                      `sel:"maxBufferLength"`
	HasUnifiedMemory        message[func(id, sel) bool]                                        `sel:"hasUnifiedMemory"`
	RecommendedWorkingSet   message[func(id, sel) uint64]                                      `sel:"recommendedMaxWorkingSetSize"`
	MaxThreadgroupMemory    message[func(id, sel) uint64]                                      `sel:"maxThreadgroupMemoryLength"`
	SupportsFamily          message[func(id, sel, int64) bool]                                 `sel:"supportsFamily:"`
	NewCommandQueue         message[func(id, sel) id]                                          `sel:"newCommandQueue"`
	NewBuffer               message[func(id, sel, uint64, uint64) id]                          `sel:"newBufferWithLength:options:"`
	NewBufferNoCopy         message[func(id, sel, unsafe.Pointer, uint64, uint64, uintptr) id] `sel:"newBufferWithBytesNoCopy:length:options:deallocator:"`
	Contents                message[func(id, sel) unsafe.Pointer]                              `sel:"contents"`
	Length                  message[func(id, sel) uint64]                                      `sel:"length"`
	SetLanguageVersion      message[func(id, sel, uint64)]                                     `sel:"setLanguageVersion:"`
	LanguageVersion         message[func(id, sel) uint64]                                      `sel:"languageVersion"`
	SetMathMode             message[func(id, sel, int64)]                                      `sel:"setMathMode:"`
	MathMode                message[func(id, sel) int64]                                       `sel:"mathMode"`
	SetFastMathEnabled      message[func(id, sel, bool)]                                       `sel:"setFastMathEnabled:"`
	FastMathEnabled         message[func(id, sel) bool]                                        `sel:"fastMathEnabled"`
	NewLibrary              message[func(id, sel, id, id, *id) id]                             `sel:"newLibraryWithSource:options:error:"`
	NewFunction             message[func(id, sel, id) id]                                      `sel:"newFunctionWithName:"`
	NewPipeline             message[func(id, sel, id, *id) id]                                 `sel:"newComputePipelineStateWithFunction:error:"`
	MaxThreadsPerGroup      message[func(id, sel) uint64]                                      `sel:"maxTotalThreadsPerThreadgroup"`
	ThreadExecutionWidth    message[func(id, sel) uint64]                                      `sel:"threadExecutionWidth"`
	StaticThreadgroupMemory message[func(id, sel) uint64]                                      `sel:"staticThreadgroupMemoryLength"`
	CommandBuffer           message[func(id, sel) id]                                          `sel:"commandBuffer"`
	ComputeEncoder          message[func(id, sel, uint64) id]                                  `sel:"computeCommandEncoderWithDispatchType:"`
	SetPipeline             message[func(id, sel, id)]                                         `sel:"setComputePipelineState:"`
	SetBuffers              message[func(id, sel, *id, *uint64, nsRange)]                      `sel:"setBuffers:offsets:withRange:"`
	SetBytes                message[func(id, sel, unsafe.Pointer, uint64, uint64)]             `sel:"setBytes:length:atIndex:"`
	Dispatch                message[func(id, sel, mtlSize, mtlSize)]                           `sel:"dispatchThreadgroups:threadsPerThreadgroup:"`
	MemoryBarrier           message[func(id, sel, uint64)]                                     `sel:"memoryBarrierWithScope:"`
	EndEncoding             message[func(id, sel)]                                             `sel:"endEncoding"`
	Commit                  message[func(id, sel)]                                             `sel:"commit"`
	WaitUntilCompleted      message[func(id, sel)]                                             `sel:"waitUntilCompleted"`
	Status                  message[func(id, sel) int64]                                       `sel:"status"`
	Error                   message[func(id, sel) id]                                          `sel:"error"`
	GPUStartTime            message[func(id, sel) float64]                                     `sel:"GPUStartTime"`
	GPUEndTime              message[func(id, sel) float64]                                     `sel:"GPUEndTime"`
}

// messageTable lists the table's entries with their selectors, in order.
func messageTable() (names []string, msgs []boundMessage) {
	v := reflect.ValueOf(&msg).Elem()
	t := v.Type()
	for i := range t.NumField() {
		names = append(names, t.Field(i).Tag.Get("sel"))
		msgs = append(msgs, v.Field(i).Addr().Interface().(boundMessage))
	}
	return names, msgs
}
