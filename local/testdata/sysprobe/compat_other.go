//go:build !amd64

package main

import "errors"

func compat32() (string, error) {
	return "", errors.New("only x86-64 has a second syscall ABI to probe")
}
