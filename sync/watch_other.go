//go:build !linux

package sync

import "errors"

// Other systems have no inotify: every scan is a full one.

const watchSupported = false

type inotify struct{}

func newInotify(string) (*inotify, error) { return nil, errors.New("no inotify on this system") }
func newInotifyMode(string, bool) (*inotify, error) {
	return nil, errors.New("no inotify on this system")
}
func (*inotify) takeWritten() map[string]bool { return nil }

func (*inotify) add(string) error                 { return nil }
func (*inotify) watched(string) bool              { return false }
func (*inotify) take() (map[string]bool, string)  { return nil, "no inotify on this system" }
func (*inotify) touch([]string)                   {}
func (*inotify) pending() (map[string]bool, bool) { return nil, true }
func (*inotify) close()                           {}
func (*inotify) kill()                            {}
func (*inotify) overflow()                        {}
