package checkpoint

import (
	"os"
	"path/filepath"
)

// fileID identifies one version of a file on disk, for the digest cache: a
// file rewritten, replaced or moved gets another one (unless it is rewritten
// in place with its size and modification time restored).
type fileID struct {
	Path    string `json:"path"` // absolute
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime_ns"`
	Inode   uint64 `json:"inode"`
	Device  uint64 `json:"device"`
}

// newFileID is the identity of the file at path, as st describes it; nil
// when the path cannot be made absolute.
func newFileID(path string, st os.FileInfo) *fileID {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil
	}
	id := &fileID{Path: abs, Size: st.Size(), ModTime: st.ModTime().UnixNano()}
	id.Inode, id.Device = inodeOf(st)
	return id
}
