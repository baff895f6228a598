// Command sbx runs commands in a disposable sandbox that holds a copy of your
// code: `sbx exec -- make test`, `sbx shell`, `sbx release`, `sbx ls`.
package main

import (
	"context"
	"os"

	"github.com/sbx-sh/sbx/internal/app"
	sbxcli "github.com/sbx-sh/sbx/internal/cli"
	"github.com/sbx-sh/sbx/internal/hostd"
)

// commands is sbx's table of subcommands, in the order of the usage text:
// a new subcommand is one row here (its Func in internal/cli, or in this
// package wrapped by own).
var commands = []sbxcli.Command{
	{Name: "exec", Run: sbxcli.Exec, Usage: `  exec [--session NAME] [--keep] [--timeout DURATION] [--disk SIZE] [--net] [--allow-net HOST]... [--code-dir DIR]... [--backend B] -- COMMAND...
                 run COMMAND (a shell command line) in the session's sandbox
`},
	{Name: "shell", Run: sbxcli.Shell, Usage: `  shell [--session NAME] [--keep] [--disk SIZE] [--net] [--allow-net HOST]... [--code-dir DIR]...
                 an interactive shell in the session's sandbox
`},
	{Name: "release", Run: sbxcli.Release, Cluster: own((*cli).clusterRelease), Usage: `  release (--session NAME | --all)
                 release a kept session's sandbox
`},
	{Name: "ls", Aliases: []string{"list"}, Run: sbxcli.List, Cluster: own((*cli).clusterList), Usage: `  ls             list kept sessions
`},
	{Name: "route", Run: sbxcli.Route, Usage: `  route [--json] [--cwd DIR] [--code-dir DIR]... [--host-command PREFIX]... -- COMMAND
                 say whether COMMAND would run on the host or in the sandbox, and why
`},
	{Name: "accept", Run: sbxcli.Accept, Usage: `  accept [--all] [--code-dir DIR]... [PATH...]
                 list the sandbox's changes to protected files (agent and editor
                 settings) waiting in .sbx/quarantine, or apply the ones named
  accept (--deletions | --reject-deletions) [--session NAME]
                 apply, or drop, the deletions a command made that sbx held
                 (most of a code dir, or git's core)
`},
	{Name: "undo", Run: sbxcli.Undo, Usage: `  undo [--session NAME] [PATH...]
                 put back on the host what the last command's pull-back
                 overwrote, deleted or created, or the named paths
`},
	{Name: "port", Run: portCmd, Usage: `  port [--session NAME] HOSTPORT[:SANDBOXPORT]
                 forward the host's 127.0.0.1:HOSTPORT to a port in a kept
                 session's sandbox (a dev server) until Ctrl-C or the session ends
`},
	{Name: "proxy", Run: proxyCmd, Usage: `  proxy --listen ADDRESS [--allow-net HOST]...
                 the egress allowlist proxy on its own, for cluster pods
`},
	{Name: "cache", Run: cacheCmd, Usage: `  cache ls | cache prune [--older-than DURATION]
                 the package caches sbx shares between sessions: sizes, removal
`},
	{Name: "setup", Run: own((*cli).setupClient), Usage: `  setup (claude-code|codex|cursor|windsurf) [--global] [--undo]
                 put a client on sbx-mcp with its own shell and file tools
                 off, and check it with the client itself
`},
	{Name: "doctor", Run: own((*cli).doctor), Usage: `  doctor [--backend local|cluster]
                 check everything a first run needs, one line per check
`},
	{Name: "pool", Run: own((*cli).pool), Usage: `  pool render ... / kubeconfig ...
                 the cluster backend's operator kit (see docs/cluster.md)
  ls --backend cluster / release --backend cluster (--session K | --all)
                 this user's claims on the cluster
`},
	{Name: "kubeconfig", Run: own((*cli).kubeconfig)},
	{Name: hostd.Arg, Run: sbxcli.HostDaemon}, // a kept session's host daemon, started by sbx exec
	{Name: "version", Aliases: []string{"--version"}, Run: sbxcli.Version, Usage: `  version        print sbx's version
`},
}

func main() {
	app.Main() // a sandbox init, an in-pod helper or a relay re-executes this binary
	os.Exit(sbxcli.Main(context.Background(), os.Args[1:], commands))
}
