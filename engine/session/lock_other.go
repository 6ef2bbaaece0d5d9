//go:build !unix

package session

import "os"

// canLock: files cannot be locked here.
const canLock = false

// tryLock always succeeds where flock is unavailable: such builds give no
// protection against two processes writing one session.
func tryLock(*os.File) (busy bool, err error) { return false, nil }

// syncDir is a no-op where directories cannot be opened for syncing.
func syncDir(string) error { return nil }
