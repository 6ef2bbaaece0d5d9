//go:build !unix

package checkpoint

import "os"

// inodeOf has no inode to give where the system has none; the path, size
// and modification time still key the digest cache.
func inodeOf(os.FileInfo) (inode, device uint64) { return 0, 0 }
