//go:build linux

package local

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sbx-sh/sbx/sandbox"
)

// cgroups holds the per-sandbox control groups that enforce Limits. Where
// this process may not create cgroups (an ordinary user without a delegated
// cgroup v2 subtree), newCgroups fails and the init applies rlimits instead.
type cgroups struct {
	dirs []string
}

const cgroupRoot = "/sys/fs/cgroup"

// newCgroups makes this sandbox's own groups, named for id (the session's
// name) and a random suffix: sessions of the same name run at once (one
// per state dir: every user's "default"), and a group shared by two would
// share its limits, and keep the release of one waiting (its group busy)
// while the other runs. A name already there is never joined.
func newCgroups(id string, l sandbox.Limits) (*cgroups, error) {
	if l.MemoryBytes == 0 && l.Pids == 0 {
		return nil, errors.New("no limits to enforce")
	}
	var b [4]byte
	rand.Read(b[:])
	id += "." + hex.EncodeToString(b[:])
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return newCgroupsV2(id, l)
	}
	cg := &cgroups{}
	type knob struct{ controller, file, value string }
	var knobs []knob
	if l.MemoryBytes > 0 {
		knobs = append(knobs, knob{"memory", "memory.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)})
	}
	if l.Pids > 0 {
		knobs = append(knobs, knob{"pids", "pids.max", strconv.Itoa(l.Pids)})
	}
	for _, k := range knobs {
		dir := filepath.Join(cgroupRoot, k.controller, "sbx", id)
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("create cgroup %s: %w", filepath.Dir(dir), err)
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		cg.dirs = append(cg.dirs, dir)
		if err := os.WriteFile(filepath.Join(dir, k.file), []byte(k.value), 0o644); err != nil {
			cg.remove()
			return nil, fmt.Errorf("set %s: %w", k.file, err)
		}
	}
	return cg, nil
}

func newCgroupsV2(id string, l sandbox.Limits) (*cgroups, error) {
	raw, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	var own string
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			own = rest
		}
	}
	if own == "" {
		return nil, errors.New("no cgroup v2 membership")
	}
	dir := filepath.Join(cgroupRoot, own, "sbx-"+id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	cg := &cgroups{dirs: []string{dir}}
	if l.MemoryBytes > 0 {
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(strconv.FormatInt(l.MemoryBytes, 10)), 0o644); err != nil {
			cg.remove()
			return nil, fmt.Errorf("set memory.max: %w", err)
		}
	}
	if l.Pids > 0 {
		if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(l.Pids)), 0o644); err != nil {
			cg.remove()
			return nil, fmt.Errorf("set pids.max: %w", err)
		}
	}
	return cg, nil
}

// add moves pid (the init, before it starts any command) into every group.
func (cg *cgroups) add(pid int) error {
	for _, dir := range cg.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("put sandbox init into cgroup %s: %w", dir, err)
		}
	}
	return nil
}

func (cg *cgroups) remove() {
	for _, dir := range cg.dirs {
		os.Remove(dir)
	}
}

// oomKills counts the processes the kernel's OOM killer ended in the
// cgroups dirs for their memory limit (cgroup v2 memory.events, v1
// memory.oom_control: the oom_kill count).
func oomKills(dirs []string) int64 {
	var total int64
	for _, dir := range dirs {
		for _, f := range []string{"memory.events", "memory.oom_control"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if n, ok := strings.CutPrefix(line, "oom_kill "); ok {
					if v, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64); err == nil {
						total += v
					}
				}
			}
		}
	}
	return total
}
