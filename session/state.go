package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"time"

	"golang.org/x/sys/unix"
)

// Info is what is saved of a session between sbx invocations, apart from the
// live session, so `sbx ls` needs no backend. Version grows when a field's
// meaning changes.
type Info struct {
	Version  int       `json:"version"`
	Name     string    `json:"name"`
	Backend  string    `json:"backend"`
	CodeDirs []string  `json:"code_dirs"`
	Network  string    `json:"network"`
	Keep     bool      `json:"keep"`
	Claimed  bool      `json:"claimed"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used"`
	Cwd      string    `json:"cwd,omitempty"`
	IdleTTL  string    `json:"idle_ttl,omitempty"`

	// Stale is set by List for a session whose sandbox was found unusable
	// (and cleaned up); it is never saved.
	Stale string `json:"-"`
}

const infoVersion = 1

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,47}$`)

// ErrBadName means a session name is not usable as given.
var ErrBadName = errors.New("bad session name")

// CheckName accepts names of 1-48 letters, digits, '.', '_' and '-' that do
// not start with punctuation.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w %q: use 1-48 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrBadName, name)
	}
	return nil
}

// DefaultStateRoot is $XDG_STATE_HOME/sbx/sessions, else
// ~/.local/state/sbx/sessions.
func DefaultStateRoot() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "sbx", "sessions"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the state directory: %w (set XDG_STATE_HOME)", err)
	}
	return filepath.Join(home, ".local", "state", "sbx", "sessions"), nil
}

func readInfo(dir string) (Info, error) {
	var info Info
	raw, err := os.ReadFile(filepath.Join(dir, "info.json"))
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return info, fmt.Errorf("parse %s: %w", filepath.Join(dir, "info.json"), err)
	}
	if info.Version != infoVersion {
		return info, fmt.Errorf("%s has version %d, this sbx reads %d", filepath.Join(dir, "info.json"), info.Version, infoVersion)
	}
	// A command that changes nothing else stamps its time on the file
	// instead of rewriting it (touchInfo).
	if fi, err := os.Stat(filepath.Join(dir, "info.json")); err == nil && fi.ModTime().After(info.LastUsed) {
		info.LastUsed = fi.ModTime().UTC()
	}
	return info, nil
}

func writeInfo(dir string, info Info) error {
	info.Version = infoVersion
	return writeJSONFile(filepath.Join(dir, "info.json"), info)
}

// touchInfo records t as the session's last use without rewriting
// info.json: its modification time (readInfo takes the later of the two).
func touchInfo(dir string, t time.Time) error {
	return os.Chtimes(filepath.Join(dir, "info.json"), t, t)
}

// sameInfo reports whether a and b differ in nothing but LastUsed (which
// touchInfo keeps).
func sameInfo(a, b Info) bool {
	a.LastUsed, b.LastUsed = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

func writeJSONFile(path string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFileRenamed(path, raw)
}

// writeFileRenamed writes a small file whole (mode 0600), by a rename.
func writeFileRenamed(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// lockFile serializes the commands of one session across processes.
type lockFile struct{ f *os.File }

func lock(dir string) (*lockFile, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return &lockFile{f}, nil
}

func (l *lockFile) unlock() {
	unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	l.f.Close()
}
