package main

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// int80 makes the i386 getpid (20) through int $0x80 and returns eax.
func int80() int32

func compat32() (string, error) {
	r := int80()
	if r < 0 && r > -4096 {
		return "", unix.Errno(-r)
	}
	return strconv.Itoa(int(r)), nil
}
