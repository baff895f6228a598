package sync

import "syscall"

const noFollow = syscall.O_NOFOLLOW
