package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkSecondSessionGoTest measures `go test ./...` of a real
// repository (SBX_BENCH_REPO, a Go module directory; by default
// BurntSushi/toml from the host's module cache), side by side in one run:
//
//	host-warm       go test ./... on the host, its caches warm (the baseline)
//	sbx-first       sbx exec -- go test ./... in the first session (sbx's caches empty)
//	sbx-second      the same in a new session each time, sbx's caches warm
//
// sbx-first and sbx-second report x-host, their ratio to host-warm.
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
	home, state, cacheHome := filepath.Join(root, "home"), filepath.Join(root, "state"), filepath.Join(root, "cache")
	os.MkdirAll(home, 0o755)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_STATE_HOME=" + state, "XDG_CACHE_HOME=" + cacheHome, "LANG=C",
		"GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOPROXY=off", "SBX_FORWARD_ENV=GOTOOLCHAIN,GOFLAGS,GOPROXY"}
	run := func(b *testing.B, argv ...string) time.Duration {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = code, env
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %v\n%s", argv, err, out)
		}
		return time.Since(start)
	}
	hostGoTest := []string{"go", "test", "./..."}
	sbxGoTest := []string{sbxBin, "exec", "--", "go test ./..."}
	// The host's own caches, warm (the host's HOME is the user's: the
	// host's GOCACHE is not sbx's).
	hostEnv := env
	env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOPROXY=off")
	run(b, hostGoTest...)
	env = hostEnv
	var host float64
	b.Run("host-warm", func(b *testing.B) {
		env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOPROXY=off")
		defer func() { env = hostEnv }()
		var total time.Duration
		for i := 0; i < b.N; i++ {
			total += run(b, hostGoTest...)
		}
		host = float64(total.Nanoseconds()) / float64(b.N)
	})
	b.Run("sbx-first", func(b *testing.B) {
		var total time.Duration
		for i := 0; i < b.N; i++ {
			os.RemoveAll(cacheHome)
			total += run(b, sbxGoTest...)
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/host, "x-host")
	})
	run(b, sbxGoTest...)
	b.Run("sbx-second", func(b *testing.B) {
		var total time.Duration
		for i := 0; i < b.N; i++ {
			total += run(b, sbxGoTest...)
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/host, "x-host")
	})
}
