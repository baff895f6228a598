package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProjectFilesReadOnlyWhenRegular: a cloned repository's .sbx.toml or
// .sbxignore that is a link to something other than a regular file (its
// caller's stdin, which is an MCP client's stream for sbx-mcp; a fifo; a
// device such as /dev/zero) is refused at once, naming the file, not read:
// os.ReadFile read the pipe until it ended (never: sbx waited for good) or a
// device without end. The project's .sbx.toml is not read through a link at
// all; a .sbxignore linked to a regular file still applies.
func TestProjectFilesReadOnlyWhenRegular(t *testing.T) {
	fifo := filepath.Join(tempDir(t), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, w *world) result {
		t.Helper()
		// sbx's stdin: a pipe held open and never written, as an MCP
		// client's.
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pw.Close()
		defer pr.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, sbxBin, "exec", "--", "echo ran")
		cmd.Dir, cmd.Env, cmd.Stdin = w.code, w.env, pr
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("sbx exec did not end in 30s (it read what the project's file names):\n%s", stderr.String())
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{stdout.String(), stderr.String(), code}
	}
	for _, c := range []struct{ name, file, target string }{
		{"config from stdin", ".sbx.toml", "/dev/stdin"},
		{"config from a fifo", ".sbx.toml", fifo},
		{"ignore from stdin", ".sbxignore", "/dev/stdin"},
		{"ignore from a fifo", ".sbxignore", fifo},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			if err := os.Symlink(c.target, filepath.Join(w.code, c.file)); err != nil {
				t.Fatal(err)
			}
			r := run(t, w)
			if r.code == 0 || strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, c.file) {
				t.Fatalf("exit %d, want a refusal naming %s:\n%s%s", r.code, c.file, r.stdout, r.stderr)
			}
		})
	}
	t.Run("ignore linked to a regular file", func(t *testing.T) {
		w := newWorld(t)
		os.WriteFile(filepath.Join(w.code, "ignore.txt"), []byte("secret.txt\n"), 0o644)
		os.WriteFile(filepath.Join(w.code, "secret.txt"), []byte("s\n"), 0o644)
		if err := os.Symlink("ignore.txt", filepath.Join(w.code, ".sbxignore")); err != nil {
			t.Fatal(err)
		}
		r := w.sbx(t, w.code, "exec", "--", "ls")
		if r.code != 0 || strings.Contains(r.stdout, "secret.txt") || !strings.Contains(r.stdout, "README") {
			t.Fatalf("exit %d, want README and no secret.txt:\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// TestSetupReadsNoProjectSpecial: sbx setup claude-code reads the
// project's .mcp.json (a repository's servers); linked to /dev/stdin it
// read the terminal (here a pipe held open) for good. It is refused,
// named, at once.
func TestSetupReadsNoProjectSpecial(t *testing.T) {
	w := newWorld(t)
	bin := tempDir(t)
	os.WriteFile(filepath.Join(bin, "claude"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
	w.env[0] = "PATH=" + bin + ":" + strings.TrimPrefix(setupPath(t), "PATH=")
	if err := os.Symlink("/dev/stdin", filepath.Join(w.code, ".mcp.json")); err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	defer pr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sbxBin, "setup", "claude-code")
	cmd.Dir, cmd.Env, cmd.Stdin = w.code, w.env, pr
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("sbx setup did not end in 30s (it read what .mcp.json names):\n%s", out)
	}
	if err == nil || !strings.Contains(string(out), ".mcp.json") || !strings.Contains(string(out), "not a regular file") {
		t.Fatalf("sbx setup: %v, want a refusal naming .mcp.json:\n%s", err, out)
	}
}
