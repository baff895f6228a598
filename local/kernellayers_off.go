//go:build linux && sbx_nokernellayers

package local

// kernelLayers is false in the benchmark baseline build only: never ship a
// binary built with sbx_nokernellayers.
const kernelLayers = false
