package sync

import "syscall"

const noFollow = syscall.O_NOFOLLOW

// noWait opens a file to read without waiting: a fifo found where a
// regular file was (swapped in since the scan) opens at once instead of
// blocking until a writer comes; every reader checks the type it opened.
const noWait = syscall.O_NONBLOCK
