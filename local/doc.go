// Package local is sbx's embedded sandbox backend: Linux namespaces from Go,
// nothing to install.
//
// Claim re-executes the running binary as a per-session init inside new user,
// mount, pid, uts, ipc and (unless the network is shared) net namespaces. The
// init builds a tmpfs root holding read-only binds of the system directories,
// a private /tmp and home, and the session's workspaces at their host paths;
// pivots into it; drops every capability (bounding set included) and sets
// no_new_privs; and then serves Exec requests on a unix socket in the
// session's state directory. Commands run as uid 1000 inside, each in a pid
// namespace of its own so that a timeout or a kill ends its whole tree.
//
// Promises: a command sees no host file outside the system directories and
// its mounts; it cannot write the system directories even when sbx runs as
// root; it sees no host process; with NetworkNone it reaches nothing beyond
// its own loopback. Binaries that use this package call Main first.
package local
