package device

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestSelectorTable: every message takes the receiver and the selector,
// then exactly one argument per colon of its selector (a selector with a
// colon too few or too many sends garbage, or crashes, only on a Mac), and
// no selector is listed twice.
func TestSelectorTable(t *testing.T) {
	names, msgs := messageTable()
	if len(names) < 40 {
		t.Fatalf("only %d messages in the table", len(names))
	}
	seen := map[string]bool{}
	idType, selType := reflect.TypeFor[id](), reflect.TypeFor[sel]()
	for i, name := range names {
		if name == "" {
			t.Errorf("message %d has no selector tag", i)
			continue
		}
		if seen[name] {
			t.Errorf("selector %q listed twice", name)
		}
		seen[name] = true
		if err := checkSignature(name, msgs[i].funcType(), idType, selType); err != "" {
			t.Error(err)
		}
	}
}

// checkSignature says what is wrong with fn as the function for selector
// name ("" when nothing is).
func checkSignature(name string, fn, idType, selType reflect.Type) string {
	if fn.Kind() != reflect.Func || fn.NumIn() < 2 || fn.In(0) != idType || fn.In(1) != selType {
		return name + ": the function must start with (id, sel)"
	}
	colons := strings.Count(name, ":")
	if args := fn.NumIn() - 2; args != colons {
		return name + ": " + itoa(args) + " arguments for " + itoa(colons) + " colons"
	}
	if colons > 0 && !strings.HasSuffix(name, ":") {
		return name + ": a selector with arguments ends in a colon"
	}
	return ""
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestCheckSignatureCatches: the check itself rejects a function with an
// argument too few and one that does not start with the receiver.
func TestCheckSignatureCatches(t *testing.T) {
	idType, selType := reflect.TypeFor[id](), reflect.TypeFor[sel]()
	if checkSignature("setBytes:length:atIndex:", reflect.TypeFor[func(id, sel, uint64, uint64)](), idType, selType) == "" {
		t.Error("a missing argument was not caught")
	}
	if checkSignature("length", reflect.TypeFor[func(uintptr, sel) uint64](), idType, selType) == "" {
		t.Error("a wrong receiver type was not caught")
	}
	if checkSignature("length", reflect.TypeFor[func(id, sel) uint64](), idType, selType) != "" {
		t.Error("a correct signature was refused")
	}
}

// TestSelectorReceivers: every message names the object it is sent to,
// one of receivers, so that CheckSelectors can ask that object on a Mac.
func TestSelectorReceivers(t *testing.T) {
	names, _ := messageTable()
	on, _ := messageReceivers()
	for i, name := range names {
		if !slices.Contains(receivers, on[i]) {
			t.Errorf("%s: receiver %q is not one of %v", name, on[i], receivers)
		}
	}
	for _, r := range receivers {
		if !slices.Contains(on, r) {
			t.Errorf("receiver %q has no message", r)
		}
	}
}
