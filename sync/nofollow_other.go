//go:build !linux

package sync

const noFollow = 0
