//go:build linux && !sbx_nokernellayers

package local

// kernelLayers: the syscall filter and Landlock are installed. Only a build
// with the tag sbx_nokernellayers (the benchmark's baseline) turns them off.
const kernelLayers = true
