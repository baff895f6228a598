// Package hostenv decides which parts of the host's environment and git
// configuration may be copied into a sandbox. Everything is refused unless
// the user named it or it is on a fixed allowlist.
//
// What it promises:
//   - Forward returns only the variables whose names match the user's
//     forward patterns and none of the skip patterns; a nil forward list
//     forwards nothing. Names that would break or redirect the sandbox
//     (PATH, HOME, LD_*, GIT_*, SSH_AUTH_SOCK, SBX_*, ... see Reserved) are
//     never forwarded, whatever the lists say, and are reported as refused.
//   - ReadConfig runs the host's git on one file with includes off, no
//     system or global config, no GIT_* variables, no HOME and stdin at
//     /dev/null, so only that file's own text is read.
//   - FilterGlobal and FilterRepo keep only keys on fixed allowlists and drop
//     any kept value that carries credentials in a URL (user:password@, or
//     any user@ in an http(s) or ftp(s) URL, since tokens travel as user
//     names). They report dropped keys, never values.
//   - Render writes a file that git reads back to exactly the same list of
//     keys and values, in the same order, repeated keys included.
package hostenv
