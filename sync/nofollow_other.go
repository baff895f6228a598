//go:build !linux

package sync

const noFollow = 0

const noWait = 0
