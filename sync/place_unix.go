//go:build unix

package sync

import (
	"errors"
	"os"
	"syscall"
)

// owner notes dst's owner: what is placed is made theirs when it is not
// this process's (sbx as root, the sandbox as a host uid of its own).
func (p *placer) owner() error {
	fi, err := p.dst.Stat(".")
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	p.uid, p.gid = int(st.Uid), int(st.Gid)
	p.chown = p.uid != os.Geteuid() || p.gid != os.Getegid()
	return nil
}

// own gives f (or name under dst, not followed when link) to dst's owner.
func (p *placer) own(f *os.File, name string, link bool) error {
	switch {
	case !p.chown:
		return nil
	case f != nil:
		return f.Chown(p.uid, p.gid)
	case link:
		return p.dst.Lchown(name, p.uid, p.gid)
	}
	return p.dst.Chown(name, p.uid, p.gid)
}

func isELOOP(err error) bool { return errors.Is(err, syscall.ELOOP) }
