//go:build !linux

package sync

// Elsewhere than Linux files are placed the portable way (place.go).

func (p *placer) openFds(src, dst string) { p.srcFd, p.dstFd = -1, -1 }

func (p *placer) closeFds() {}

func (p *placer) fastFiles(string, []Change) (int, bool, error) { return 0, false, nil }

func (p *placer) fastDirs([]Change) (bool, error) { return false, nil }

func (p *placer) fastChmodDirs([]Change) (bool, error) { return false, nil }
