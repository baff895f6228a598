//go:build !linux

package inpod

func setSubreaper() error { return nil }
