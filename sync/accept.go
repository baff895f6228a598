package sync

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
)

// Quarantined lists the files waiting under the code dir's quarantine, as
// paths relative to the code dir (where they would go).
func Quarantined(codeDir string) ([]string, error) {
	r, err := os.OpenRoot(codeDir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []string
	err = fs.WalkDir(r.FS(), QuarantineDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if !d.IsDir() {
			out = append(out, p[len(QuarantineDir)+1:])
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// Accept applies one quarantined file: it replaces the code dir's file with
// the sandbox's version (atomically, through os.Root) and removes it from the
// quarantine. The next sync sends nothing back for it: the sandbox has it.
func Accept(codeDir, rel string) error {
	if err := CheckPath(rel); err != nil {
		return err
	}
	r, err := os.OpenRoot(codeDir)
	if err != nil {
		return err
	}
	defer r.Close()
	src := path.Join(QuarantineDir, rel)
	fi, err := r.Lstat(src)
	if err != nil {
		return fmt.Errorf("%s is not in quarantine: %w", rel, err)
	}
	if err := r.MkdirAll(path.Dir(rel), 0o755); err != nil && path.Dir(rel) != "." {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory; accept the files in it", rel)
	}
	if err := r.Rename(src, rel); err != nil {
		return fmt.Errorf("accept %s: %w", rel, err)
	}
	// Tidy the now empty quarantine directories.
	for d := path.Dir(src); d != QuarantineDir && d != "." && d != "/"; d = path.Dir(d) {
		if r.Remove(d) != nil {
			break
		}
	}
	return nil
}
