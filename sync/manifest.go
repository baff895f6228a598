// Package sync moves code between the host working tree and a sandbox's copy
// of it.
//
// Promises: it never writes outside a code directory (every host write goes
// through an os.Root opened on the code directory: no "..", no absolute
// names, no write through a symlink); it brings back into .git only what git
// needs to record work (objects, refs, logs, index, ...), never what makes the
// host run something (config, hooks); and it never brings back a symlink that
// points outside the code directory.
package sync

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Entry is what a manifest records of one path.
type Entry struct {
	Mode  fs.FileMode `json:"m"` // type bits and permissions
	Size  int64       `json:"s,omitempty"`
	MTime int64       `json:"t,omitempty"` // nanoseconds since the epoch
	Link  string      `json:"l,omitempty"` // symlink target
}

// Manifest maps slash-separated paths relative to a tree's root to entries.
type Manifest map[string]Entry

// Same reports whether two entries describe the same content.
func (e Entry) Same(o Entry) bool {
	if e.Mode != o.Mode {
		return false
	}
	switch {
	case e.Mode.IsDir():
		return true
	case e.Mode&fs.ModeSymlink != 0:
		return e.Link == o.Link
	}
	return e.Size == o.Size && e.MTime == o.MTime
}

// Scan walks root and records every directory, regular file and symlink
// below it. Other file types (sockets, devices, fifos) are left out.
func Scan(root string) (Manifest, error) {
	m := Manifest{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if p == root {
			return nil
		}
		rel := filepath.ToSlash(p[len(root)+1:])
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		e := Entry{Mode: info.Mode() & (fs.ModeType | fs.ModePerm)}
		switch {
		case info.IsDir():
		case info.Mode()&fs.ModeSymlink != 0:
			e.Link, err = os.Readlink(p)
			if err != nil {
				return err
			}
		case info.Mode().IsRegular():
			e.Size = info.Size()
			e.MTime = info.ModTime().UnixNano()
		default:
			return nil
		}
		m[rel] = e
		return nil
	})
	return m, err
}

// Change is one difference between two manifests.
type Change struct {
	Path    string
	Deleted bool
	Entry   Entry // the new entry, when not deleted
}

// Diff lists what changed from old to cur: creations and modifications in
// lexical order (parents before children), then deletions deepest first.
func Diff(old, cur Manifest) []Change {
	var puts, dels []Change
	for p, e := range cur {
		if o, ok := old[p]; !ok || !o.Same(e) {
			puts = append(puts, Change{Path: p, Entry: e})
		}
	}
	for p := range old {
		if _, ok := cur[p]; !ok {
			dels = append(dels, Change{Path: p, Deleted: true})
		}
	}
	sort.Slice(puts, func(i, j int) bool { return puts[i].Path < puts[j].Path })
	sort.Slice(dels, func(i, j int) bool { return dels[i].Path > dels[j].Path })
	return append(puts, dels...)
}

// CheckPath refuses a path that could name something outside its tree: it
// must be relative, slash-separated, clean, and free of "." and ".."
// elements and NUL bytes.
func CheckPath(p string) error {
	switch {
	case p == "" || p == ".":
		return errors.New("empty path")
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("path %q contains a NUL byte", p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute", p)
	case strings.Contains(p, `\`):
		return fmt.Errorf("path %q contains a backslash", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("path %q has an empty, . or .. element", p)
		}
	}
	return nil
}
