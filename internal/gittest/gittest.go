// Package gittest serves git repositories for tests: a bare repository over
// smart HTTP (git-http-backend), since host git refuses local transports.
package gittest

import (
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// HTTPRemote creates the bare repository base/remote.git (branch main,
// pushes allowed), serves it on 127.0.0.1 until the test ends, and returns
// its URL and path. home is the HOME git-http-backend runs with.
func HTTPRemote(t testing.TB, base, home string) (url, bare string) {
	t.Helper()
	bare = filepath.Join(base, "remote.git")
	run := func(dir string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run(base, "init", "-q", "--bare", "-b", "main", bare)
	run(bare, "config", "http.receivepack", "true")
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal("these tests need git (apt-get install git)")
	}
	srv := httptest.NewServer(&cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + base, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + home},
	})
	t.Cleanup(srv.Close)
	return srv.URL + "/remote.git", bare
}
