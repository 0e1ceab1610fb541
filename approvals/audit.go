package approvals

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// By says who answered a card.
type By string

const (
	ByPanel        By = "panel"
	ByHotkey       By = "hotkey"
	ByNotification By = "notification"
	ByCLI          By = "cli"
	ByAuto         By = "auto" // codexgate itself, with the reason recorded
)

// Record is one line of the audit log.
type Record struct {
	Time       time.Time       `json:"time"`
	Event      string          `json:"event"` // open, revised, shown, end, unsent, refused
	Card       string          `json:"card,omitempty"`
	Worker     string          `json:"worker,omitempty"`
	ThreadID   string          `json:"threadId,omitempty"`
	TurnID     string          `json:"turnId,omitempty"`
	ItemID     string          `json:"itemId,omitempty"`
	Method     string          `json:"method,omitempty"`
	Kind       Kind            `json:"kind,omitempty"`
	Command    string          `json:"command,omitempty"`
	Cwd        string          `json:"cwd,omitempty"`
	Host       string          `json:"host,omitempty"`
	GrantRoot  string          `json:"grantRoot,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Files      []string        `json:"files,omitempty"`
	Revision   int             `json:"revision,omitempty"`
	SHA256     string          `json:"sha256,omitempty"`
	DiffSHA256 string          `json:"diffSha256,omitempty"`
	Decision   Decision        `json:"decision,omitempty"`
	By         By              `json:"by,omitempty"`
	Why        string          `json:"why,omitempty"`
	Reply      json.RawMessage `json:"reply,omitempty"`
}

// Auditor writes records; Write returns only once the record is durable.
type Auditor interface {
	Write(Record) error
}

// Audit is the JSON Lines audit log, each record synced to disk before
// Write returns.
type Audit struct {
	mu sync.Mutex // protects f
	f  *os.File
}

// OpenAudit opens (creating, 0600) the log at path for appending.
func OpenAudit(path string) (*Audit, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create audit log directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("protect audit log: %w", err)
	}
	return &Audit{f: f}, nil
}

// DefaultAuditPath is $XDG_STATE_HOME/codexgate/audit.jsonl.
func DefaultAuditPath() (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find state directory: %w", err)
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "codexgate", "audit.jsonl"), nil
}

func (a *Audit) Write(r Record) error {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode audit record: %w", err)
	}
	line = append(line, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.f.Write(line); err != nil {
		return fmt.Errorf("write audit log: %w", err)
	}
	if err := a.f.Sync(); err != nil {
		return fmt.Errorf("sync audit log: %w", err)
	}
	return nil
}

// Close closes the log.
func (a *Audit) Close() error { return a.f.Close() }
