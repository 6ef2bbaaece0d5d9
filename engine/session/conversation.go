package session

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// conversationFile holds a session's message history (the answers
// included), so that a new turn that sends only its own messages can be
// rendered with the whole history, exactly as a full-history request would
// be, and the record of the requests that appended each turn. Snapshots
// make the rendering cheap to run; the history makes it possible to render.
const conversationFile = "conversation.json"

// Conversation is a session's message history and where each turn of it
// came from.
type Conversation struct {
	Messages []json.RawMessage `json:"messages"`
	// Turns records, oldest first, the request that appended each turn, so
	// that a request run again on the same history (a batch resumed after a
	// kill that came between saving the turn and writing its result) is
	// recognised instead of appending the same turn twice.
	Turns []TurnRecord `json:"turns"`
	// ForkedFrom is the session this one was forked from, and ForkedAt the
	// number of Turns it had then.
	ForkedFrom string `json:"forked_from,omitempty"`
	ForkedAt   int    `json:"forked_at,omitempty"`
}

// TurnRecord says which request appended Messages[Start:End], on top of
// which history.
type TurnRecord struct {
	Request string `json:"request"` // the caller's identity of the request (a hash of it)
	History string `json:"history"` // HashMessages(Messages[:Start])
	Start   int    `json:"start"`
	End     int    `json:"end"`
}

// HashMessages identifies a message history: SHA-256 over the messages'
// compact JSON, each with its length.
func HashMessages(msgs []json.RawMessage) string {
	h := sha256.New()
	var buf bytes.Buffer
	for _, m := range msgs {
		buf.Reset()
		if json.Compact(&buf, m) != nil {
			buf.Write(m)
		}
		fmt.Fprintf(h, "%d:", buf.Len())
		h.Write(buf.Bytes())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// FindTurn returns the newest recorded turn that request appended on top
// of the history it still has before it: the request was already run and
// committed. last says that no turn came after it.
func (c *Conversation) FindTurn(request string) (rec TurnRecord, last bool, ok bool) {
	for i := len(c.Turns) - 1; i >= 0; i-- {
		r := c.Turns[i]
		if r.Request != request || r.Start < 0 || r.Start > r.End || r.End > len(c.Messages) {
			continue
		}
		if HashMessages(c.Messages[:r.Start]) == r.History {
			return r, i == len(c.Turns)-1 && r.End == len(c.Messages), true
		}
	}
	return TurnRecord{}, false, false
}

// Append adds a turn, the messages added by request, to the end of the
// history.
func (c *Conversation) Append(request string, added ...json.RawMessage) {
	start := len(c.Messages)
	c.Turns = append(c.Turns, TurnRecord{Request: request, History: HashMessages(c.Messages), Start: start, End: start + len(added)})
	c.Messages = append(c.Messages, added...)
}

// ReplaceLast replaces the last turn (which FindTurn found for request,
// with last true) by the messages added by a new run of the same request:
// committing a turn twice leaves it once.
func (c *Conversation) ReplaceLast(request string, added ...json.RawMessage) error {
	n := len(c.Turns)
	if n == 0 || c.Turns[n-1].Request != request || c.Turns[n-1].End != len(c.Messages) {
		return fmt.Errorf("session: the last turn of the conversation is not this request's")
	}
	c.Messages = c.Messages[:c.Turns[n-1].Start]
	c.Turns = c.Turns[:n-1]
	c.Append(request, added...)
	return nil
}

// SaveConversation replaces the session's conversation, atomically.
func (ss *Session) SaveConversation(c *Conversation) error {
	if err := ss.held(); err != nil {
		return err
	}
	if c.Messages == nil {
		cc := *c
		cc.Messages = []json.RawMessage{}
		c = &cc
	}
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("session: conversation of %q: %w", ss.name, err)
	}
	dir := ss.store.sessionDir(ss.name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	_, err = writeAtomic(filepath.Join(dir, conversationFile), func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	return err
}

// Conversation returns a session's saved conversation, or nil when it has
// none (a new session). A history saved as a bare JSON array of messages
// (before turns were recorded) reads with no turn records.
func (s *Store) Conversation(name string) (*Conversation, error) {
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
	c := &Conversation{}
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		err = json.Unmarshal(data, &c.Messages)
	} else {
		err = json.Unmarshal(data, c)
	}
	if err == nil && c.Messages == nil {
		err = errors.New(`no "messages"`)
	}
	if err != nil {
		return nil, &SnapshotError{File: path, Reason: ErrCorrupt, Detail: "the conversation is not valid: " + err.Error()}
	}
	return c, nil
}
