//go:build !unix

package sync

import (
	"errors"
	"os"
)

// linkOut is not available here: the journal copies.
func linkOut(dir *os.Root, name, dst string) error {
	return errors.New("hard links are not used on this system")
}
