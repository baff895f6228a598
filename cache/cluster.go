package cache

import (
	"path/filepath"
	"strings"
)

// ClusterEnv is the variables that point the tools at a cluster pool's
// per-node cache mounted at mount (sbx pool render --cache-mount): the
// same caches and variables as a local sandbox's (Kinds), each in a
// directory of its name below the mount (GOMODCACHE=<mount>/go-mod,
// GOCACHE=<mount>/cache/go-build, ...). The cluster backend passes a
// command exactly the engine's environment, so the engine adds these.
func ClusterEnv(mount string) []string {
	var env []string
	for _, k := range Kinds {
		dir := filepath.Join(mount, k.Name)
		for _, kv := range k.Env {
			name, val, _ := strings.Cut(kv, "=")
			if rest, ok := strings.CutPrefix(val, k.Target); ok && (rest == "" || rest[0] == '/') {
				val = dir + rest
			}
			env = append(env, name+"="+val)
		}
	}
	return env
}
