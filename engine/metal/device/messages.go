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
	selector() sel
}

func (m *message[F]) bind(s sel, msgSend uintptr) {
	m.sel = s
	purego.RegisterFunc(&m.call, msgSend)
}

func (m *message[F]) funcType() reflect.Type { return reflect.TypeFor[F]() }

func (m *message[F]) selector() sel { return m.sel }

// msg is the table of every message sent, each field tagged with its
// selector and the object it is sent to (on; optional where only newer
// macOS has it and the code checks first). load binds them all once;
// TestSelectorTable checks on every OS that each function takes one
// argument per colon and names a receiver of receivers; CheckSelectors
// asks each receiver on a Mac whether it responds.
var msg struct {
	Alloc                   message[func(id, sel) id]                                          `sel:"alloc" on:"NSString class"`
	New                     message[func(id, sel) id]                                          `sel:"new" on:"MTLCompileOptions class"`
	Retain                  message[func(id, sel) id]                                          `sel:"retain" on:"object"`
	Release                 message[func(id, sel)]                                             `sel:"release" on:"object"`
	InstancesRespond        message[func(id, sel, sel) bool]                                   `sel:"instancesRespondToSelector:" on:"NSError class"`
	RespondsToSelector      message[func(id, sel, sel) bool]                                   `sel:"respondsToSelector:" on:"object"`
	InitWithBytes           message[func(id, sel, unsafe.Pointer, uint64, uint64) id]          `sel:"initWithBytes:length:encoding:" on:"NSString"`
	UTF8String              message[func(id, sel) unsafe.Pointer]                              `sel:"UTF8String" on:"NSString"`
	LocalizedDescription    message[func(id, sel) id]                                          `sel:"localizedDescription" on:"NSError"`
	Name                    message[func(id, sel) id]                                          `sel:"name" on:"device"`
	MaxBufferLength         message[func(id, sel) uint64]                                      `sel:"maxBufferLength" on:"device"`
	HasUnifiedMemory        message[func(id, sel) bool]                                        `sel:"hasUnifiedMemory" on:"device"`
	RecommendedWorkingSet   message[func(id, sel) uint64]                                      `sel:"recommendedMaxWorkingSetSize" on:"device"`
	MaxThreadgroupMemory    message[func(id, sel) uint64]                                      `sel:"maxThreadgroupMemoryLength" on:"device"`
	SupportsFamily          message[func(id, sel, int64) bool]                                 `sel:"supportsFamily:" on:"device"`
	NewCommandQueue         message[func(id, sel) id]                                          `sel:"newCommandQueue" on:"device"`
	NewBuffer               message[func(id, sel, uint64, uint64) id]                          `sel:"newBufferWithLength:options:" on:"device"`
	NewBufferNoCopy         message[func(id, sel, unsafe.Pointer, uint64, uint64, uintptr) id] `sel:"newBufferWithBytesNoCopy:length:options:deallocator:" on:"device"`
	Contents                message[func(id, sel) unsafe.Pointer]                              `sel:"contents" on:"buffer"`
	Length                  message[func(id, sel) uint64]                                      `sel:"length" on:"buffer"`
	SetLanguageVersion      message[func(id, sel, uint64)]                                     `sel:"setLanguageVersion:" on:"compile options"`
	LanguageVersion         message[func(id, sel) uint64]                                      `sel:"languageVersion" on:"compile options"`
	SetMathMode             message[func(id, sel, int64)]                                      `sel:"setMathMode:" on:"compile options" optional:"newer macOS"`
	MathMode                message[func(id, sel) int64]                                       `sel:"mathMode" on:"compile options" optional:"newer macOS"`
	SetFastMathEnabled      message[func(id, sel, bool)]                                       `sel:"setFastMathEnabled:" on:"compile options"`
	FastMathEnabled         message[func(id, sel) bool]                                        `sel:"fastMathEnabled" on:"compile options"`
	NewLibrary              message[func(id, sel, id, id, *id) id]                             `sel:"newLibraryWithSource:options:error:" on:"device"`
	NewFunction             message[func(id, sel, id) id]                                      `sel:"newFunctionWithName:" on:"library"`
	NewPipeline             message[func(id, sel, id, *id) id]                                 `sel:"newComputePipelineStateWithFunction:error:" on:"device"`
	MaxThreadsPerGroup      message[func(id, sel) uint64]                                      `sel:"maxTotalThreadsPerThreadgroup" on:"pipeline"`
	ThreadExecutionWidth    message[func(id, sel) uint64]                                      `sel:"threadExecutionWidth" on:"pipeline"`
	StaticThreadgroupMemory message[func(id, sel) uint64]                                      `sel:"staticThreadgroupMemoryLength" on:"pipeline"`
	CommandBuffer           message[func(id, sel) id]                                          `sel:"commandBuffer" on:"queue"`
	ComputeEncoder          message[func(id, sel, uint64) id]                                  `sel:"computeCommandEncoderWithDispatchType:" on:"command buffer"`
	SetPipeline             message[func(id, sel, id)]                                         `sel:"setComputePipelineState:" on:"encoder"`
	SetBuffers              message[func(id, sel, *id, *uint64, nsRange)]                      `sel:"setBuffers:offsets:withRange:" on:"encoder"`
	SetBytes                message[func(id, sel, unsafe.Pointer, uint64, uint64)]             `sel:"setBytes:length:atIndex:" on:"encoder"`
	Dispatch                message[func(id, sel, mtlSize, mtlSize)]                           `sel:"dispatchThreadgroups:threadsPerThreadgroup:" on:"encoder"`
	MemoryBarrier           message[func(id, sel, uint64)]                                     `sel:"memoryBarrierWithScope:" on:"encoder"`
	EndEncoding             message[func(id, sel)]                                             `sel:"endEncoding" on:"encoder"`
	Commit                  message[func(id, sel)]                                             `sel:"commit" on:"command buffer"`
	WaitUntilCompleted      message[func(id, sel)]                                             `sel:"waitUntilCompleted" on:"command buffer"`
	Status                  message[func(id, sel) int64]                                       `sel:"status" on:"command buffer"`
	Error                   message[func(id, sel) id]                                          `sel:"error" on:"command buffer"`
	GPUStartTime            message[func(id, sel) float64]                                     `sel:"GPUStartTime" on:"command buffer"`
	GPUEndTime              message[func(id, sel) float64]                                     `sel:"GPUEndTime" on:"command buffer"`
}

// receivers are the objects messages are sent to, as the on tags name them.
var receivers = []string{"NSString class", "MTLCompileOptions class", "NSError class", "object", "NSString", "NSError", "device", "buffer",
	"compile options", "library", "pipeline", "queue", "command buffer", "encoder"}

// messageReceivers lists, in the table's order, each message's receiver
// and whether it is optional.
func messageReceivers() (on []string, optional []bool) {
	t := reflect.TypeOf(msg)
	for i := range t.NumField() {
		on = append(on, t.Field(i).Tag.Get("on"))
		optional = append(optional, t.Field(i).Tag.Get("optional") != "")
	}
	return on, optional
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
