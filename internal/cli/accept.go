package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sbx-sh/sbx/internal/app"
	"github.com/sbx-sh/sbx/internal/escape"
	sbxsync "github.com/sbx-sh/sbx/sync"
)

// Accept implements `sbx accept`: it lists or applies quarantined changes
// to protected files, and applies or drops held deletions.
func Accept(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet("accept", e.Stderr)
	all := fs.Bool("all", false, "apply every quarantined file")
	var codeDirs MultiFlag
	fs.Var(&codeDirs, "code-dir", "a code `dir` (repeatable; default: the git top level, else the current directory)")
	deletions := fs.Bool("deletions", false, "apply the deletions sbx held for the session")
	reject := fs.Bool("reject-deletions", false, "drop the deletions sbx held for the session: the host keeps the files and the next command puts them back into the sandbox")
	sess := fs.String("session", "default", "the session `name` whose held deletions to apply or drop")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if *deletions || *reject {
		if *deletions && *reject || fs.NArg() > 0 || *all {
			fmt.Fprintf(e.Stderr, "sbx: error: accept takes either --deletions or --reject-deletions, with --session NAME and nothing else\n")
			return ExitUsage
		}
		return acceptDeletions(ctx, e, *sess, *reject)
	}
	if m, err := manager(e); err == nil {
		if held, err := m.HeldDeletions(*sess); err == nil && len(held) > 0 {
			n := 0
			for _, h := range held {
				for _, f := range h.HeldFiles() {
					fmt.Fprintf(e.Stdout, "%s (deleted in session %s, held: %s)\n", escape.Name(f), *sess, escape.Line(h.Reason))
					n++
				}
			}
			fmt.Fprintf(e.Stdout, "apply those %d deletions with sbx accept --deletions --session %s, or drop them with --reject-deletions\n", n, *sess)
		}
	}
	cwd, err := os.Getwd()
	if err != nil {
		return e.Fail(err)
	}
	dirs := app.ChooseCodeDirs(codeDirs, nil, cwd)
	names := fs.Args()
	applied := 0
	for _, d := range dirs {
		d, err := filepath.Abs(d)
		if err != nil {
			return e.Fail(err)
		}
		list, err := sbxsync.Quarantined(d)
		if err != nil {
			return e.Fail(fmt.Errorf("read the quarantine of %s: %w", d, err))
		}
		for _, rel := range list {
			want := *all
			for _, n := range names {
				if n == rel || n == filepath.Join(d, rel) {
					want = true
				}
			}
			if !want {
				if len(names) == 0 {
					fmt.Fprintf(e.Stdout, "%s (review %s)\n", escape.Name(filepath.Join(d, rel)), escape.Name(filepath.Join(d, sbxsync.QuarantineDir, rel)))
				}
				continue
			}
			if err := sbxsync.Accept(d, rel); err != nil {
				return e.Fail(err)
			}
			applied++
			fmt.Fprintf(e.Stdout, "accepted %s\n", escape.Name(filepath.Join(d, rel)))
		}
	}
	if len(names) > 0 && applied < len(names) {
		return e.Fail(fmt.Errorf("%d of the named files are not in quarantine (sbx accept lists them)", len(names)-applied))
	}
	return 0
}

// acceptDeletions applies or drops the held deletions of a session.
func acceptDeletions(ctx context.Context, e *Env, sess string, reject bool) int {
	m, err := manager(e)
	if err != nil {
		return e.Fail(err)
	}
	res, dropped, err := m.AcceptDeletions(ctx, sess, reject, m.Params.JournalSize)
	if err != nil {
		return e.Fail(err, "sbx accept --session "+sess+" lists what is held")
	}
	if reject {
		fmt.Fprintf(e.Stdout, "dropped %d held deletions of session %s: the host keeps the files, and the session's next command puts them back into its sandbox\n", dropped, sess)
		return 0
	}
	for _, p := range res.Deleted {
		fmt.Fprintf(e.Stdout, "deleted %s\n", escape.Name(p))
	}
	for _, p := range res.Kept {
		fmt.Fprintf(e.Stdout, "kept %s (changed on the host since the sandbox deleted it)\n", escape.Name(p))
	}
	fmt.Fprintf(e.Stdout, "deleted %d files; they are in the journal: sbx undo --session %s brings them back\n", len(res.Deleted), sess)
	return 0
}

// Undo implements `sbx undo`: it puts back what a session's pull-backs
// changed on the host.
func Undo(ctx context.Context, e *Env, args []string) int {
	fs := NewFlagSet("undo", e.Stderr)
	sess := fs.String("session", "default", "the session `name` whose changes to undo")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	m, err := manager(e)
	if err != nil {
		return e.Fail(err)
	}
	var paths []string
	for _, p := range fs.Args() {
		abs, err := filepath.Abs(p)
		if err != nil {
			return e.Fail(err)
		}
		paths = append(paths, abs)
	}
	res, err := m.Undo(ctx, *sess, paths, m.Params.JournalSize)
	if err != nil {
		return e.Fail(err)
	}
	for _, p := range res.Restored {
		fmt.Fprintf(e.Stdout, "restored %s\n", escape.Name(p))
	}
	for _, p := range res.Removed {
		fmt.Fprintf(e.Stdout, "removed %s (the command had created it)\n", escape.Name(p))
	}
	for _, p := range res.KeptCurrent {
		fmt.Fprintf(e.Stdout, "kept %s: it had changed since; that version is in the journal too (sbx undo --session %s %s brings it back)\n", escape.Name(p), *sess, escape.Name(p))
	}
	for _, p := range res.Missing {
		fmt.Fprintf(e.Stderr, "sbx: not restored: %s\n", escape.Line(p))
	}
	if len(res.Restored)+len(res.Removed) == 0 {
		return e.Fail(fmt.Errorf("nothing was undone"))
	}
	if len(res.Missing) > 0 {
		return ExitSbxError
	}
	return 0
}
