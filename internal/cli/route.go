package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sbx-sh/sbx/config"
	"github.com/sbx-sh/sbx/internal/app"
	"github.com/sbx-sh/sbx/router"
)

// Route implements `sbx route`: it explains where a command would run. It
// only decides, never runs.
func Route(_ context.Context, e *Env, args []string) int {
	fs := NewFlagSet("route", e.Stderr)
	asJSON := fs.Bool("json", false, "print {\"where\":...,\"reason\":...}")
	cwdFlag := fs.String("cwd", "", "decide as if run from `dir` (default: the current directory)")
	var codeDirs, hostCommands MultiFlag
	fs.Var(&codeDirs, "code-dir", "a code `dir` (repeatable; default: the git top level, else the current directory)")
	fs.Var(&hostCommands, "host-command", "a host command `prefix` (repeatable; replaces the configured list)")
	if err := fs.Parse(args); err != nil {
		return ExitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(e.Stderr, "sbx: error: route needs a command: sbx route [flags] -- COMMAND\n")
		return ExitUsage
	}
	command := strings.Join(fs.Args(), " ")
	cwd := *cwdFlag
	if cwd == "" {
		var err error
		if cwd, err = os.Getwd(); err != nil {
			fmt.Fprintf(e.Stderr, "sbx: error: %v\n", err)
			return ExitUsage
		}
	}
	cwd, err := filepath.Abs(cwd)
	if err != nil {
		fmt.Fprintf(e.Stderr, "sbx: error: %v\n", err)
		return ExitUsage
	}
	cfg, err := config.Load(config.Sources{})
	if err != nil {
		fmt.Fprintf(e.Stderr, "sbx: error: %v\n", err)
		return ExitUsage
	}
	if hostCommands.List() != nil {
		cfg.HostCommands = hostCommands
	}
	prefixes, err := router.ParsePrefixes(cfg.HostCommands)
	if err != nil {
		fmt.Fprintf(e.Stderr, "sbx: error: %v\n", err)
		return ExitUsage
	}
	dirs := app.ChooseCodeDirs(codeDirs, cfg.CodeDirs, cwd)
	for i, d := range dirs {
		if dirs[i], err = filepath.Abs(d); err != nil {
			fmt.Fprintf(e.Stderr, "sbx: error: %v\n", err)
			return ExitUsage
		}
	}
	d := router.Decide(command, cwd, dirs, prefixes)
	if *asJSON {
		raw, _ := json.Marshal(d)
		fmt.Fprintf(e.Stdout, "%s\n", raw)
		return 0
	}
	reason := strings.TrimPrefix(d.Reason, string(d.Where)+": ")
	fmt.Fprintf(e.Stdout, "%s: %s\n", d.Where, reason)
	return 0
}
