package hostd

import (
	"testing"

	"github.com/sbx-sh/sbx/internal/app"
)

func TestKeyComputes(t *testing.T) {
	t.Chdir(t.TempDir())
	w, err := app.Setup(app.Flags{Keep: true}, app.PerCommand, nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := key(w, "/x", "s")
	if err != nil || !isKey(k) {
		t.Fatalf("key = %q, %v", k, err)
	}
}
