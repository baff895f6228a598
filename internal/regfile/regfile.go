// Package regfile reads the small files sbx takes from a project (its
// .sbx.toml, each code dir's .sbxignore) on the host. A cloned repository
// chooses what those names are: a symbolic link to /dev/zero made os.ReadFile
// read without end (its memory growing), and one to /dev/stdin made sbx-mcp
// read the MCP client's own stream, or wait on it for good. Only a regular
// file is read, opened without waiting (a fifo), and at most Max bytes.
package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Max is the most a project file may hold.
const Max = 1 << 20

// Read returns the contents of the regular file at path, at most Max
// bytes. With followLink false a symbolic link at path is refused, not
// followed. A missing file is an error that matches fs.ErrNotExist, a
// directory one that matches syscall.EISDIR.
func Read(path string, followLink bool) ([]byte, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK
	if !followLink {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		if !followLink && errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link: sbx reads it only as a regular file", path)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: syscall.EISDIR}
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%v): sbx reads it only as one", path, fi.Mode().Type())
	}
	if fi.Size() > Max {
		return nil, fmt.Errorf("%s holds %d bytes, more than the %d sbx reads", path, fi.Size(), Max)
	}
	b, err := io.ReadAll(io.LimitReader(f, Max+1))
	if err != nil {
		return nil, err
	}
	if len(b) > Max {
		return nil, fmt.Errorf("%s holds more than the %d bytes sbx reads", path, Max)
	}
	return b, nil
}
