//go:build !darwin

package cli

import (
	"strings"

	"petal/engine/metal/device"
)

// probeMetal says why there is no Metal here (device.Open's error).
func probeMetal() metalReport {
	d, err := device.Open()
	if err == nil { // not reached: the !darwin build has no device
		d.Close()
	}
	reason := "Metal is only available on macOS with Apple silicon"
	if err != nil {
		reason = strings.TrimPrefix(err.Error(), "metal: ")
	}
	return metalReport{Reason: reason}
}
