package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sbx-sh/sbx/internal/app"
	"github.com/sbx-sh/sbx/internal/hostd"
	"github.com/sbx-sh/sbx/portfwd"
	"github.com/sbx-sh/sbx/session"
)

// manager is the engine on the configured backend, for the commands that
// work on existing sessions (ls, release, accept, undo).
func manager(e *Env) (*session.Manager, error) {
	return app.Manager(app.PerCommand, e.Log)
}

// Release implements `sbx release (--session NAME | --all)`: it releases a
// kept session's sandbox, or every one.
func Release(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet("release", e.Stderr)
	sess := fs.String("session", "", "session `name` to release")
	all := fs.Bool("all", false, "release every session")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if (*sess == "") == !*all || fs.NArg() > 0 {
		fmt.Fprintf(e.Stderr, "sbx: error: release needs --session NAME or --all\n")
		return ExitUsage
	}
	m, err := manager(e)
	if err != nil {
		return e.Fail(err)
	}
	// A session's host daemon ends first: it holds the session open.
	if root, err := session.DefaultStateRoot(); err == nil {
		names := []string{*sess}
		if *all {
			names = nil
			ents, _ := os.ReadDir(root)
			for _, ent := range ents {
				if ent.IsDir() && session.CheckName(ent.Name()) == nil {
					names = append(names, ent.Name())
				}
			}
		}
		for _, n := range names {
			if session.CheckName(n) != nil {
				continue
			}
			if err := hostd.Stop(ctx, filepath.Join(root, n), n, 10*time.Second); err != nil {
				fmt.Fprintf(e.Stderr, "sbx: warning: session %s: %v\n", n, err)
			}
		}
	}
	if *all {
		names, err := m.ReleaseAll(ctx)
		for _, n := range names {
			fmt.Fprintf(e.Stdout, "released %s\n", n)
		}
		if err != nil {
			return e.Fail(err)
		}
		return 0
	}
	notes, err := m.ReleaseNotes(ctx, *sess)
	for _, n := range notes {
		fmt.Fprintf(e.Stderr, "sbx: note: %s\n", n)
	}
	if err != nil {
		return e.Fail(err)
	}
	fmt.Fprintf(e.Stdout, "released %s\n", *sess)
	return 0
}

// List implements `sbx ls`: the kept sessions, one a line.
func List(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet("ls", e.Stderr)
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return ExitUsage
	}
	m, err := manager(e)
	if err != nil {
		return e.Fail(err)
	}
	infos, err := m.List(ctx)
	if err != nil {
		return e.Fail(err)
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tBACKEND\tAGE\tIDLE\tCODE DIRS\tPORTS")
	now := time.Now()
	root, _ := session.DefaultStateRoot()
	for _, in := range infos {
		if in.Stale != "" {
			fmt.Fprintf(e.Stderr, "sbx: note: %s; cleaned up\n", in.Stale)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", in.Name, in.Backend, Human(now.Sub(in.Created)), Human(now.Sub(in.LastUsed)), strings.Join(in.CodeDirs, ","), portfwd.Summary(filepath.Join(root, in.Name)))
	}
	tw.Flush()
	return 0
}
