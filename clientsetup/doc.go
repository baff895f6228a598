// Package clientsetup puts a coding agent on sbx: `sbx setup claude-code |
// codex | cursor | windsurf [--global] [--undo]`. It registers sbx-mcp with
// the client, turns the client's own shell and file tools off, and then asks
// the client itself whether that worked.
//
// Promises: it changes only the keys it names (every other key, and the
// file's order, stay); a second run changes nothing and says so; before its
// first change to a file it keeps what was there (or that nothing was) under
// sbx's state directory, and --undo puts that back byte for byte; it fails
// closed: a check that fails is reported with what to do, as an error; it
// never writes a project's file through a symbolic link below the project
// (a cloned repository may plant one), and writes a user-level link where it
// leads (place); it runs a client's command only from an absolute PATH
// entry, never a program of the project's found through a relative one.
package clientsetup
