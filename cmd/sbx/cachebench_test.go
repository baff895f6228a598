package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sh/sbx/internal/testenv"
	"github.com/sbx-sh/sbx/local"
)

// BenchmarkSecondSessionGoTest measures `go test ./...` of a real
// repository (SBX_BENCH_REPO, a Go module directory; by default
// BurntSushi/toml from the host's module cache), side by side in one run:
//
//	sbx-first       sbx exec -- go test ./... in the first session (sbx's caches empty)
//	second-session  per iteration, interleaved: go test ./... on the host, its
//	                caches warm (the baseline), then the same through sbx exec in
//	                a new session, sbx's caches warm (and, when SBX_BENCH_BASE
//	                names another sbx binary, the same through it: old against
//	                new in the same loop)
//	second-session-clone  the same in a clone of that repository (.git a pack
//	                and a few dozen files, as a user's clone has it, where the
//	                repository made for the bench holds its commit's loose objects)
//
// second-session reports the medians (host-ms, sbx-ms, base-ms) and
// x-host, the ratio of the medians, and x-host-sum, the ratio of the sums;
// the order within an iteration rotates so neither side always runs first,
// and each run starts once the last release's detached remover is done.
func BenchmarkSecondSessionGoTest(b *testing.B) {
	src := os.Getenv("SBX_BENCH_REPO")
	if src == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			b.Fatalf("go env GOMODCACHE: %v", err)
		}
		matches, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "github.com", "!burnt!sushi", "toml@v1.*"))
		if len(matches) == 0 {
			b.Fatal("no BurntSushi/toml in the host's module cache: set SBX_BENCH_REPO to a Go module directory")
		}
		src = matches[len(matches)-1]
	}
	root, err := os.MkdirTemp("", "sbxbench")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(root)
	code := filepath.Join(root, "repo")
	for _, c := range [][]string{{"cp", "-r", src, code}, {"chmod", "-R", "u+w", code}, {"git", "-C", code, "init", "-q"},
		{"git", "-C", code, "add", "-A"}, {"git", "-C", code, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "import"}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			b.Fatalf("%v: %v %s", c, err, out)
		}
	}
	// The same repository as a clone has it: its objects in one pack, and
	// .git a few dozen files instead of the commit's loose objects.
	clone := filepath.Join(root, "clone")
	if out, err := exec.Command("git", "clone", "-q", "--no-local", code, clone).CombinedOutput(); err != nil {
		b.Fatalf("git clone: %v %s", err, out)
	}
	home, state, cacheHome := filepath.Join(root, "home"), filepath.Join(root, "state"), filepath.Join(root, "cache")
	os.MkdirAll(home, 0o755)
	// The sandbox's own small binary, as go install puts it beside sbx
	// (TestMain builds it): without it each sandbox stage re-executes the
	// whole sbx, client-go's package initialization and all.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_STATE_HOME=" + state, "XDG_CACHE_HOME=" + cacheHome, "LANG=C",
		"GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOPROXY=off", "SBX_FORWARD_ENV=GOTOOLCHAIN,GOFLAGS,GOPROXY",
		local.EnvSandboxBin + "=" + os.Getenv(local.EnvSandboxBin)}
	// What a release leaves to its detached remover (the workspaces, on
	// disk or in memory) is done before the next run starts, whichever side
	// it is: its CPU is not charged to the host's go test.
	settle := func(b *testing.B) {
		trashes := []string{filepath.Join(state, "sbx", "sessions.trash"), filepath.Join("/dev/shm", "sbx-"+strconv.Itoa(os.Geteuid()), "trash")}
		if rt := os.Getenv("XDG_RUNTIME_DIR"); rt != "" {
			trashes = append(trashes, filepath.Join(rt, "sbx-"+strconv.Itoa(os.Geteuid()), "trash"))
		}
		if !testenv.WaitFor(30*time.Second, func() bool {
			for _, t := range trashes {
				if entries, _ := os.ReadDir(t); len(entries) > 0 {
					return false
				}
			}
			return true
		}) {
			b.Fatalf("a released workspace is still in one of %v after 30 s", trashes)
		}
	}
	dir := code
	run := func(b *testing.B, argv ...string) time.Duration {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = dir, env
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %v\n%s", argv, err, out)
		}
		return time.Since(start)
	}
	hostGoTest := []string{"go", "test", "./..."}
	sbxGoTest := []string{sbxBin, "exec", "--", "go test ./..."}
	base := os.Getenv("SBX_BENCH_BASE")
	// The host's own caches, warm (the host's HOME is the user's: the
	// host's GOCACHE is not sbx's).
	sbxEnv := env
	hostEnv := append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOPROXY=off")
	env = hostEnv
	run(b, hostGoTest...)
	env = sbxEnv
	b.Run("sbx-first", func(b *testing.B) {
		var total time.Duration
		for i := 0; i < b.N; i++ {
			os.RemoveAll(cacheHome)
			total += run(b, sbxGoTest...)
		}
		b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "sbx-ms")
	})
	run(b, sbxGoTest...)
	if base != "" {
		run(b, base, "exec", "--", "go test ./...")
	}
	secondSession := func(b *testing.B) {
		type side struct {
			name string
			argv []string
			env  []string
			runs []time.Duration
		}
		sides := []*side{{name: "host", argv: hostGoTest, env: hostEnv}, {name: "sbx", argv: sbxGoTest, env: sbxEnv}}
		if base != "" {
			// The base's own sandbox binary, when one was built beside it.
			baseEnv := slices.Clone(sbxEnv)
			if _, err := os.Stat(filepath.Join(filepath.Dir(base), local.SandboxBinName)); err == nil {
				baseEnv = append(baseEnv, local.EnvSandboxBin+"="+filepath.Join(filepath.Dir(base), local.SandboxBinName))
			}
			sides = append(sides, &side{name: "base", argv: []string{base, "exec", "--", "go test ./..."}, env: baseEnv})
		}
		for i := 0; i < b.N; i++ {
			for j := range sides {
				s := sides[(i+j)%len(sides)]
				env = s.env
				settle(b)
				s.runs = append(s.runs, run(b, s.argv...))
			}
			var line []string
			for _, s := range sides {
				line = append(line, fmt.Sprintf("%s %.1f ms", s.name, ms(s.runs[i])))
			}
			b.Logf("iteration %d: %s", i, strings.Join(line, ", "))
		}
		env = sbxEnv
		host := sides[0]
		for _, s := range sides {
			b.ReportMetric(ms(median(s.runs)), s.name+"-ms")
			if s != host {
				prefix := ""
				if s.name != "sbx" {
					prefix = s.name + "-"
				}
				b.ReportMetric(float64(median(s.runs))/float64(median(host.runs)), prefix+"x-host")
				b.ReportMetric(float64(sum(s.runs))/float64(sum(host.runs)), prefix+"x-host-sum")
			}
		}
	}
	b.Run("second-session", secondSession)
	dir = clone
	env = hostEnv
	run(b, hostGoTest...)
	env = sbxEnv
	run(b, sbxGoTest...)
	if base != "" {
		run(b, base, "exec", "--", "go test ./...")
	}
	b.Run("second-session-clone", secondSession)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func sum(d []time.Duration) (t time.Duration) {
	for _, x := range d {
		t += x
	}
	return t
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
