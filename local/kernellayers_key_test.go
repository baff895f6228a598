//go:build linux

package local

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"golang.org/x/sys/unix"
)

// hostKey adds a key to the host user's keyring, as aws-vault or Kerberos
// would, and returns the keyring's serial, the key's and its secret. The key
// is revoked when the test ends.
func hostKey(t *testing.T) (ring, key int, secret string) {
	t.Helper()
	ring, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_USER_KEYRING, true)
	if err != nil {
		t.Fatalf("find the host user's keyring: %v", err)
	}
	var b [8]byte
	rand.Read(b[:])
	secret = "sbx-secret-" + hex.EncodeToString(b[:])
	key, err = unix.AddKey("user", "sbxtest-"+hex.EncodeToString(b[:4]), []byte(secret), ring)
	if err != nil {
		t.Fatalf("add a key to the host user's keyring: %v", err)
	}
	t.Cleanup(func() { unix.KeyctlInt(unix.KEYCTL_REVOKE, key, 0, 0, 0) })
	return ring, key, secret
}
