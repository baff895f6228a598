// Package router decides where an agent's shell command runs: on the host, which
// holds the user's credentials, or in the sandbox, which holds none.
//
// A command runs on the host only when the router can prove, on the command's
// mvdan.cc/sh syntax tree, that it is a listed host command (by default the git
// network commands) plus glue that cannot touch files. Everything else, and
// everything the router cannot prove, runs in the sandbox. See docs/security.md
// for every rule and the reason for it.
//
// What the package promises:
//   - Decide is a pure function of its arguments and of Lstat results on paths
//     inside the code dirs. It never runs a program and never expands a variable,
//     a glob, a tilde or a substitution.
//   - A Host decision carries a Plan: quote-removed argument vectors, a working
//     directory and fd routing. The host runner executes the Plan without a shell;
//     echo and printf are already rendered into bytes.
//   - A parse error, an unknown syntax node or anything unlisted is Sandbox.
//   - The package imports only the standard library and mvdan.cc/sh/v3/syntax.
//
// Paths are POSIX paths, as they are inside the sandbox.
package router
