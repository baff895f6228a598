package clientsetup

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// record is what one setup changed, kept until --undo: every file as it was
// before sbx first changed it, and whether sbx registered the server through
// the client's own CLI (undone through it too, so that sbx never rewrites a
// file the client keeps its own state in, such as ~/.claude.json).
type record struct {
	Client     string       `json:"client"`
	Scope      string       `json:"scope"`
	Files      []fileBackup `json:"files"`
	Registered string       `json:"registered_scope,omitempty"` // `claude mcp add --scope` used
}

type fileBackup struct {
	Path    string      `json:"path"`
	Existed bool        `json:"existed"`
	Mode    fs.FileMode `json:"mode,omitempty"`
	Content []byte      `json:"content,omitempty"`
	Written string      `json:"written_sha256"` // what sbx left there, to notice later edits
	MadeDir string      `json:"made_dir,omitempty"`
}

func recordPath(stateDir, client, scope string) string {
	sum := sha256.Sum256([]byte(scope))
	return filepath.Join(stateDir, "setup", client+"-"+hex.EncodeToString(sum[:6])+".json")
}

func loadRecord(path string) (*record, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r record
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("read the setup backup %s: %w", path, err)
	}
	return &r, nil
}

func (r *record) save(path string) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("save the setup backup: %w", err)
	}
	return writeAtomic(path, raw, 0o600)
}

func (r *record) file(path string) *fileBackup {
	for i := range r.Files {
		if r.Files[i].Path == path {
			return &r.Files[i]
		}
	}
	return nil
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// writeFile replaces path with data, first keeping in r what was there
// before sbx's first change (a later run keeps the older backup).
func (r *record) writeFile(path string, data []byte) error {
	old, err := os.ReadFile(path)
	existed := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	b := r.file(path)
	if b == nil {
		r.Files = append(r.Files, fileBackup{Path: path, Existed: existed, Mode: mode, Content: old})
		b = &r.Files[len(r.Files)-1]
		if !existed {
			b.MadeDir = firstMissingDir(filepath.Dir(path))
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := writeAtomic(path, data, mode); err != nil {
		return err
	}
	b.Written = sha(data)
	return nil
}

// firstMissingDir is the outermost directory of dir that does not exist
// yet: what --undo removes again when it is empty.
func firstMissingDir(dir string) string {
	missing := ""
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			return missing
		}
		missing = d
		if filepath.Dir(d) == d {
			return missing
		}
	}
}

// restore puts every file back as it was; a file edited since sbx wrote it
// is left alone and reported, so undo never throws away the user's work.
func (r *record) restore() (restored []string, err error) {
	var errs []error
	for i := len(r.Files) - 1; i >= 0; i-- {
		b := r.Files[i]
		if _, err := place(projectOf(r.Scope), b.Path); err != nil {
			errs = append(errs, fmt.Errorf("not restored: %w", err))
			continue
		}
		now, rerr := os.ReadFile(b.Path)
		if rerr == nil && sha(now) != b.Written {
			errs = append(errs, fmt.Errorf("%s changed since sbx setup wrote it: left as it is; its earlier content is in the setup backup", b.Path))
			continue
		}
		if b.Existed {
			if err := writeAtomic(b.Path, b.Content, b.Mode); err != nil {
				errs = append(errs, err)
				continue
			}
		} else {
			if err := os.Remove(b.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				continue
			}
			if b.MadeDir != "" {
				removeEmptyUpTo(filepath.Dir(b.Path), b.MadeDir)
			}
		}
		restored = append(restored, b.Path)
	}
	return restored, errors.Join(errs...)
}

func removeEmptyUpTo(dir, top string) {
	for {
		if os.Remove(dir) != nil || dir == top {
			return
		}
		dir = filepath.Dir(dir)
	}
}

func writeAtomic(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".sbx-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
