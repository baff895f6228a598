// Command sbx-mcp is sbx's MCP server: bash, read, write, edit and release
// tools that run in a disposable sandbox, as drop-in replacements for a
// coding agent's own. Over stdio (the default) one connection is one sbx
// session; with --http each client gets its own. Nothing is claimed until the
// first tool call. Logs go to stderr only. The server is internal/mcpserver;
// this file is its flags.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sbx-sh/sbx/internal/app"
	"github.com/sbx-sh/sbx/internal/mcpserver"
	"github.com/sbx-sh/sbx/internal/version"
)

func main() {
	app.Main() // a sandbox init, an in-pod helper or a relay re-executes this binary
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

const usage = `usage: sbx-mcp [flags]

An MCP server whose bash, read, write, edit and release tools run in a
disposable sandbox holding your code (see docs/mcp.md).

  claude mcp add sbx -- sbx-mcp
  sbx-mcp --http 127.0.0.1:8765        (token from SBX_TOKEN, --token-file, or printed)

flags:
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sbx-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var o mcpserver.Options
	fs.StringVar(&o.HTTP, "http", "", "serve Streamable HTTP at `addr` (endpoint /mcp) instead of stdio")
	fs.StringVar(&o.TokenFile, "token-file", "", "read the HTTP bearer token from `file`")
	fs.BoolVar(&o.Net, "net", false, "share the host network with the sandbox (default: loopback only)")
	fs.StringVar(&o.Session, "session", "", "session `name` for stdio (default: mcp-<pid>-<random>)")
	fs.StringVar(&o.IdleTTL, "idle-ttl", "", "release a sandbox unused for this `duration` (default from config: 30m)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	var codeDirs, allowNet multiFlag
	fs.Var(&allowNet, "allow-net", "a `host` the sandbox may reach through sbx's egress proxy (repeatable; example.com, *.example.com, 10.0.0.5:8080; the flags replace the config's allow_net)")
	fs.Var(&codeDirs, "code-dir", "a code `dir` to sync with the sandbox (repeatable; default: the git top level, else the current directory)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sbx-mcp: error: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if o.HTTP != "" && o.Session != "" {
		fmt.Fprintf(stderr, "sbx-mcp: error: --session is for stdio: over HTTP every client gets its own session\n")
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "sbx-mcp %s\n", version.String())
		return 0
	}
	o.CodeDirs = codeDirs
	o.AllowNet = allowNet
	return mcpserver.Run(o, stdin, stdout, stderr)
}
