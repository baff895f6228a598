// Package sync moves code between the host working tree and a sandbox's copy
// of it, incrementally and in one round trip per command. The host tree is
// the source of truth between commands.
//
// Both sides keep a manifest of the last synced state (path, type, size,
// mtime, mode, symlink target, and a content hash where size and mtime cannot
// decide; manifest.go). Before a command the host sends what changed on its
// side since then, one patch (a tar stream, patch.go) per code dir; the
// in-sandbox helper applies it, the command runs, and the helper answers with
// what changed on its side. helper.go is the sandbox side (Helper: Apply,
// Collect); host.go the host side (Host, Round: Begin, WritePush, ReadPull,
// Finish). It runs no program and opens no connection: it reads and writes
// the trees, the session's state directory and the streams it is handed; the
// backends carry the streams.
//
// What it promises the host (docs/security.md, "Pulling changes back" and
// "Nothing is lost", gives each rule's reason, bound and limit):
//
//   - It never writes outside a code directory: every host write goes through
//     an os.Root opened on the code directory (no "..", no absolute names, no
//     write through a symlink); host writes are atomic (temp file, rename).
//   - The host trusts nothing the sandbox sends. Each change coming back is
//     checked by the helper (a refusal stays in the sandbox and is reported)
//     and again by the host (ReadPull, CheckPullBack, CheckLinkTree), which
//     refuses a patch that breaks a rule as a whole before anything of it is
//     applied. Every stream is read against a bound (Limits, PullLimits,
//     MaxReplyBytes, MaxPadding).
//   - Nothing the host runs is planted: into .git comes back only what git
//     writes to record work (never config, hooks, info, modules, worktrees,
//     commondir, alternates, nor a nested .git in any spelling); git's objects
//     and packs never change under their name; no symlink whose target leaves
//     the code directory, by its text or through the tree's links. Changes to
//     what host tools run or trust (DefaultProtected, matched at any depth and
//     case-folded as case-insensitive hosts compare names; git's rebase todo
//     lists; the hooks, config files and programs the host's git runs or
//     reads, which the session names in HostDir.Hooks; a directory shaped like
//     a git repository) are kept aside under QuarantineDir for the user
//     to accept (Accept).
//   - Nothing is lost: a path changed on both sides keeps the host's version
//     and the sandbox's is written beside it (ConflictSuffix); a removal never
//     removes what changed on the other side; every host file a pull-back
//     overwrites or deletes is kept first in the session's Journal (Undo); a
//     pull-back that would delete most of a code dir or git's core is held
//     (MassDelete) until the user accepts or rejects it (AcceptDeletions,
//     RejectDeletions).
//   - Paths the walk cannot open are left out and reported (Skip), never taken
//     for deleted on the other side.
package sync
