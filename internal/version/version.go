// Package version is sbx's version, shared by its binaries: a kept local
// sandbox is reattached only by the same version that started it.
package version

import "runtime/debug"

// Base is the release this tree builds.
const Base = "0.1.0-dev"

// String is Base plus the VCS revision the binary was built from, when the
// build recorded it.
func String() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return Base + "+" + s.Value[:12]
			}
		}
	}
	return Base
}
