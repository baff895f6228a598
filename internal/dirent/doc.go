// Package dirent lists a directory open at a descriptor with getdents64 into
// a buffer the caller reuses, and stats its entries with statx relative to
// that descriptor, passing the name where the kernel wrote it: a walk of a
// tree makes no allocation per entry and no lookup of a whole path. It is
// the host's walker of trees the sandbox wrote (the disk limit's sum, the
// sync's scan), so it never follows a symbolic link.
// It exists on Linux only; other systems walk with the standard library.
package dirent
