//go:build !darwin

package device

import (
	"errors"
	"strings"
	"testing"
)

func TestOpenSaysWhy(t *testing.T) {
	d, err := Open()
	if d != nil || !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "macOS with Apple silicon") {
		t.Fatalf("Open() = %v, %v", d, err)
	}
}
