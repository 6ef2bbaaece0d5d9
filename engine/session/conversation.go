package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// conversationFile holds a session's message history (a JSON array of chat
// messages, the answers included), so that a new turn that sends only its
// own messages can be rendered with the whole history, exactly as a
// full-history request would be. Snapshots make the rendering cheap to
// run; the history makes it possible to render.
const conversationFile = "conversation.json"

// SaveConversation replaces the session's message history, atomically.
func (ss *Session) SaveConversation(messages []byte) error {
	if err := ss.held(); err != nil {
		return err
	}
	if !json.Valid(messages) {
		return fmt.Errorf("session: conversation of %q is not valid JSON", ss.name)
	}
	dir := ss.store.sessionDir(ss.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	_, err := writeAtomic(filepath.Join(dir, conversationFile), func(w io.Writer) error {
		_, err := w.Write(messages)
		return err
	})
	return err
}

// Conversation returns a session's saved message history, or nil when it
// has none (a new session).
func (s *Store) Conversation(name string) ([]byte, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	path := filepath.Join(s.sessionDir(name), conversationFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	if !json.Valid(data) {
		return nil, &SnapshotError{File: path, Reason: ErrCorrupt, Detail: "the conversation is not valid JSON"}
	}
	return data, nil
}
