//go:build linux

package local

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sbx-sh/sbx/sandbox"
)

// Layers starts a throwaway sandbox (a small workspace, a memory and a pid
// limit, no network), looks at what it really got, and releases it. The
// answer is a probe of one real sandbox, not of what the host supports: a
// layer that the kernel offers but sbx failed to apply shows as missing. The
// uid map and the cgroups are read from the host side (the kernel's view of
// the init); the /proc masks (and the seccomp and Landlock state) from a
// command run inside, as any command would see them.
func (p *Provider) Layers(ctx context.Context) ([]Layer, error) {
	dir, err := os.MkdirTemp("", "sbxdoctor")
	if err != nil {
		return nil, fmt.Errorf("create a state dir for the probe sandbox: %w", err)
	}
	defer os.RemoveAll(dir)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return nil, err
	}
	spec := sandbox.Spec{
		Name: "doctor", StateDir: dir,
		Mounts: []sandbox.Mount{{Source: work, Target: probeDir}},
		Limits: sandbox.Limits{MemoryBytes: 512 << 20, Pids: 256},
	}
	sb, err := p.Claim(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("start a probe sandbox: %w", err)
	}
	defer sb.Release(context.Background())
	b := sb.(*box)
	var out bytes.Buffer
	res, err := b.Exec(ctx, &sandbox.Cmd{
		Argv: []string{"/bin/sh", "-c", probeScript()}, Dir: probeDir,
		Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + sandboxHome},
		Stdout: &out, Stderr: &out, Timeout: 20 * time.Second,
	})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(out.String()))
	}
	if err != nil {
		return nil, fmt.Errorf("run the probe command in the sandbox: %w", err)
	}
	return layersOf(b.st, out.String()), nil
}

const probeDir = "/sbx-doctor"

// probeScript prints, in sections, what a command sees: its status (the
// seccomp fields), its mounts, which of the masked and read-only paths exist,
// and whether it can write its workspace.
func probeScript() string {
	var s strings.Builder
	s.WriteString("echo '## status'; cat /proc/self/status\n")
	s.WriteString("echo '## mounts'; cat /proc/self/mounts\n")
	s.WriteString("echo '## exists'\n")
	for _, p := range append(append([]string{}, readOnlyPaths...), maskedPaths...) {
		fmt.Fprintf(&s, "for f in %s; do [ -e \"$f\" ] && echo \"$f\"; done\n", p)
	}
	s.WriteString("echo '## workspace'; touch probe && echo writable\n")
	// /dev is a writable tmpfs: only Landlock refuses a new file there.
	s.WriteString("echo '## landlock'; if touch /dev/.sbx-probe 2>/dev/null; then rm -f /dev/.sbx-probe; echo unrestricted; else echo refused; fi\n")
	s.WriteString("echo '## end'\n")
	return s.String()
}

// probeSections splits the probe's output by its "## name" lines.
func probeSections(out string) map[string]string {
	secs := map[string]string{}
	name := ""
	for _, l := range strings.SplitAfter(out, "\n") {
		if n, ok := strings.CutPrefix(strings.TrimSpace(l), "## "); ok {
			name = n
			continue
		}
		secs[name] += l
	}
	return secs
}

func layersOf(st state, probe string) []Layer {
	secs := probeSections(probe)
	return []Layer{
		uidLayer(st, secs),
		procLayer(secs),
		seccompLayer(secs),
		landlockLayer(secs),
		cgroupLayer(st),
	}
}

func uidLayer(st state, secs map[string]string) Layer {
	l := Layer{Name: "uid mapping"}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", st.Pid))
	if err != nil {
		l.Detail = "cannot read the init's uid map: " + err.Error()
		return l
	}
	f := strings.Fields(string(raw))
	if len(f) != 3 || f[0] != strconv.Itoa(sandboxUID) || f[2] != "1" {
		l.Detail = fmt.Sprintf("unexpected uid map %q", strings.TrimSpace(string(raw)))
		return l
	}
	host, _ := strconv.Atoi(f[1])
	switch {
	case host == 0:
		l.Detail = "sandbox uid 1000 is host uid 0"
	case !strings.Contains(secs["workspace"], "writable"):
		l.Detail = fmt.Sprintf("sandbox uid 1000 is host uid %d, but it cannot write its workspace", host)
	default:
		l.Active = true
		l.Detail = fmt.Sprintf("sandbox uid 1000 is host uid %d (%s)", host, st.IDSource)
	}
	return l
}

func procLayer(secs map[string]string) Layer {
	mounts := map[string]string{} // mount point -> options
	for _, line := range strings.Split(secs["mounts"], "\n") {
		if f := strings.Fields(line); len(f) >= 4 {
			mounts[f[1]] = f[3]
		}
	}
	var missing []string
	n := 0
	for _, p := range strings.Fields(secs["exists"]) {
		opts, ok := mounts[p]
		if !ok || !strings.HasPrefix(opts, "ro") {
			missing = append(missing, p)
			continue
		}
		n++
	}
	l := Layer{Name: "/proc masking"}
	switch {
	case len(missing) > 0:
		l.Detail = "not read-only or not masked: " + strings.Join(missing, ", ")
	case n == 0:
		l.Detail = "none of the masked paths were found in the sandbox's /proc"
	default:
		l.Active = true
		l.Detail = fmt.Sprintf("%d paths read-only or masked (/proc/sys, /proc/keys, /proc/kcore, ...)", n)
		if _, ok := mounts["/sys"]; !ok {
			l.Detail += "; /sys is not mounted"
		}
	}
	return l
}

// seccompLayer says whether commands run under sbx's syscall filter: the
// kernel's own word (Seccomp: 2 in the command's status), with the filter's
// size.
func seccompLayer(secs map[string]string) Layer {
	l := Layer{Name: "seccomp"}
	mode, filters := "", ""
	for _, line := range strings.Split(secs["status"], "\n") {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			mode = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(line, "Seccomp_filters:"); ok {
			filters = strings.TrimSpace(v)
		}
	}
	_, detail := SeccompLayer()
	if mode != "2" {
		l.Detail = fmt.Sprintf("commands run without a syscall filter (Seccomp: %q); %s", mode, detail)
		return l
	}
	l.Active = true
	l.Detail = detail
	if filters != "" {
		l.Detail += "; " + filters + " filter(s) on a command"
	}
	return l
}

// landlockLayer says whether commands run under sbx's Landlock ruleset: the
// probe's new file in /dev (a writable tmpfs) is refused only by it.
func landlockLayer(secs map[string]string) Layer {
	l := Layer{Name: "Landlock"}
	ok, detail := LandlockLayer()
	refused := strings.Contains(secs["landlock"], "refused")
	switch {
	case ok && refused:
		l.Active = true
		l.Detail = detail
	case ok:
		l.Detail = "the kernel has Landlock but a command could write outside the sandbox's writable mounts (a new file in /dev)"
	default:
		l.Detail = detail
	}
	return l
}

func cgroupLayer(st state) Layer {
	l := Layer{Name: "cgroups"}
	if len(st.Cgroups) == 0 {
		l.Detail = "limits fall back to rlimits"
		if st.CgroupNote != "" {
			l.Detail += ": " + st.CgroupNote
		}
		return l
	}
	var set []string
	for _, d := range st.Cgroups {
		for _, knob := range []string{"memory.max", "memory.limit_in_bytes", "pids.max"} {
			if b, err := os.ReadFile(filepath.Join(d, knob)); err == nil {
				set = append(set, knob+"="+strings.TrimSpace(string(b)))
			}
		}
	}
	l.Active = len(set) > 0
	l.Detail = strings.Join(set, ", ") + " in " + strings.Join(st.Cgroups, ", ")
	if !l.Active {
		l.Detail = "no limit is set in " + strings.Join(st.Cgroups, ", ")
	}
	return l
}
