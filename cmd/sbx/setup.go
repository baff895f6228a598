package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sbx-sh/sbx/clientsetup"
	"github.com/sbx-sh/sbx/session"
)

const setupUsage = "usage: sbx setup claude-code|codex|cursor|windsurf [--global] [--undo]\n"

// setup implements `sbx setup CLIENT [--global] [--undo]`: see clientsetup.
func (c *cli) setupClient(ctx context.Context, args []string) int {
	fs := newFlagSet("setup", c.stderr)
	global := fs.Bool("global", false, "set up the user-level files instead of this project's")
	undo := fs.Bool("undo", false, "put back what the last sbx setup changed")
	var client string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		client, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if client == "" && fs.NArg() == 1 {
		client = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprint(c.stderr, setupUsage)
		return exitUsage
	}
	if !slices.Contains(clientsetup.Clients, client) {
		fmt.Fprintf(c.stderr, "sbx: error: setup: client %q: want one of %s\n%s", client, strings.Join(clientsetup.Clients, ", "), setupUsage)
		return exitUsage
	}
	dir, err := os.Getwd()
	if err != nil {
		return c.fail(fmt.Errorf("setup: find the current directory: %w", err))
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return c.fail(fmt.Errorf("setup: find the home directory: %w", err), "set HOME")
	}
	sessions, err := session.DefaultStateRoot()
	if err != nil {
		return c.fail(err)
	}
	err = clientsetup.Run(ctx, clientsetup.Options{
		Client: client, Global: *global, Undo: *undo,
		Dir: dir, Home: home, StateDir: filepath.Dir(sessions), Stdout: c.stdout,
	})
	if err != nil {
		// A failed check and a failed change both leave the client not
		// (or not provably) on sbx: fail closed either way.
		fmt.Fprintf(c.stderr, "sbx: setup %s: %v\n", client, err)
		return 1
	}
	return 0
}
