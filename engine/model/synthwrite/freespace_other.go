//go:build !(linux || darwin)

package synthwrite

// freeBytes cannot tell the free space on this system: a full disk shows
// as an error of the write itself.
func freeBytes(string) (int64, bool) { return 0, false }
