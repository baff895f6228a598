package hostd

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"testing"
)

// TestDaemonStartingAfterReleaseMakesNothing: a daemon that starts while
// its session is being released (sbx exec --keep starts it in the
// background, sbx release may run right after) makes no file in the state
// dir: it made its lock file there, and the release's removal of the
// directory failed with "directory not empty" (TestSandboxRunsTheSmallBinary,
// once in CI).
func TestDaemonStartingAfterReleaseMakesNothing(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	raw, _ := json.Marshal(startInfo{Session: "s", Key: "k"})
	t.Setenv(envStart, string(raw))
	if err := run(dir, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("run: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the daemon of a released session made %v in its state dir", ents[0].Name())
	}
}
