//go:build !unix

package cli

import "os"

// descriptorReplaced: closed standard descriptors are only detected on Unix.
func descriptorReplaced(*os.File) bool { return false }
