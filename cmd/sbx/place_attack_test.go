package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPlacedFirstPushSpecialFiles: what a host tree holds beside plain
// files, as the first push is placed (written by the host into the
// workspace): a fifo (opening it for reading would wait for a writer), a
// device node and a unix socket are not placed; two hard links to one host
// file are two files of their own in the sandbox (a write to one reaches
// neither the other nor the host); a setuid-root host file and a setgid
// directory arrive without those bits. And the way back: what the sandbox
// makes setuid or setgid comes to the host without them. Held when written.
func TestPlacedFirstPushSpecialFiles(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test makes a device node and setuid-root files on the host: run it as root (the CI does)")
	}
	w := newWorld(t)
	code := w.code
	os.WriteFile(filepath.Join(code, "a"), []byte("shared\n"), 0o644)
	if err := os.Link(filepath.Join(code, "a"), filepath.Join(code, "hard")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(code, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(code, "null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(code, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	raw, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(code, "suid"), raw, 0o755)
	os.Chmod(filepath.Join(code, "suid"), 0o755|os.ModeSetuid|os.ModeSetgid)
	os.Mkdir(filepath.Join(code, "sgdir"), 0o775)
	os.Chmod(filepath.Join(code, "sgdir"), 0o775|os.ModeSetgid)

	script := `ls -A | sort | tr '\n' ' '; echo
stat -c '%n %h %a' a hard suid; stat -c '%n %a' sgdir
echo changed >> hard; cat a
cp /bin/true made-suid; chmod 6755 made-suid; mkdir made-sg; chmod 2775 made-sg`
	r := w.sbxEnv(t, code, []string{"SBX_DEBUG=1"}, "exec", "--keep", "--session", "special", "--", script)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "first push placed") {
		t.Fatalf("the first push was not placed:\n%s", r.stderr)
	}
	want := ".git README a hard sgdir suid \n" +
		"a 1 644\nhard 1 644\nsuid 1 755\nsgdir 775\n" + // setuid, setgid dropped; links apart
		"shared\n"
	if r.stdout != want {
		t.Fatalf("the sandbox saw\n%s\nwant\n%s", r.stdout, want)
	}
	if b, _ := os.ReadFile(filepath.Join(code, "a")); string(b) != "shared\n" {
		t.Fatalf("a write to one hard link in the sandbox reached the host's other name: a is %q", b)
	}
	for _, p := range []string{"made-suid", "made-sg", "suid", "sgdir"} {
		fi, err := os.Lstat(filepath.Join(code, p))
		if err != nil {
			t.Fatalf("%s on the host: %v", p, err)
		}
		if p == "suid" || p == "sgdir" {
			continue // the host's own: as the user made them
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 {
			t.Errorf("%s came back to the host as %v", p, fi.Mode())
		}
	}
	for _, p := range []string{"fifo", "null", "sock"} {
		if _, err := os.Lstat(filepath.Join(code, p)); err != nil {
			t.Errorf("the host's %s is gone after the round trip: %v", p, err)
		}
	}
	w.sbx(t, code, "release", "--session", "special")
}

// TestJournalKeepsAHardLinkedVersion: a host file with a second name (a
// hard link) that a pull-back overwrites is kept in the journal as it was,
// though the other name is edited in place afterwards: the journal held
// the very inode both names shared (a hard link "where possible"), so the
// edit of the other name rewrote the version sbx undo puts back.
func TestJournalKeepsAHardLinkedVersion(t *testing.T) {
	w := newWorld(t)
	code := w.code
	a, b := filepath.Join(code, "a"), filepath.Join(code, "b")
	os.WriteFile(a, []byte("version 1\n"), 0o644)
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	if r := w.sbx(t, code, "exec", "--keep", "--session", "jl", "--", "echo version 2 > a"); r.code != 0 {
		t.Fatalf("exec: %d %s", r.code, r.stderr)
	}
	if got, _ := os.ReadFile(a); string(got) != "version 2\n" {
		t.Fatalf("a on the host after the pull-back: %q", got)
	}
	// The user edits the other name in place.
	f, err := os.OpenFile(b, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("edited through b\n")
	f.Close()
	if r := w.sbx(t, code, "undo", "--session", "jl"); r.code != 0 {
		t.Fatalf("undo: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if got, _ := os.ReadFile(a); string(got) != "version 1\n" {
		t.Fatalf("sbx undo put back %q for a, want the version the pull-back overwrote, %q", got, "version 1\n")
	}
	w.sbx(t, code, "release", "--session", "jl")
}
