package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/sbx-sh/sbx/cache"
	"github.com/sbx-sh/sbx/config"
	sbxcli "github.com/sbx-sh/sbx/internal/cli"
)

// cacheCmd is `sbx cache ls` and `sbx cache prune [--older-than D]`.
func cacheCmd(ctx context.Context, e *sbxcli.Env, args []string) int {
	if len(args) == 0 || (args[0] != "ls" && args[0] != "prune") {
		fmt.Fprintf(e.Stderr, "sbx: error: cache needs ls or prune: sbx cache ls | sbx cache prune [--older-than DURATION]\n")
		return sbxcli.ExitUsage
	}
	fs := sbxcli.NewFlagSet("cache "+args[0], e.Stderr)
	older := ""
	if args[0] == "prune" {
		fs.StringVar(&older, "older-than", "", "remove only the caches no sandbox has used for this `duration` (\"7d\", \"48h\"); default: all")
	}
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		return sbxcli.ExitUsage
	}
	root, err := cache.Root()
	if err != nil {
		return e.Fail(err)
	}
	if args[0] == "ls" {
		list, err := cache.List(root)
		if err != nil {
			return e.Fail(err)
		}
		tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "CACHE\tSIZE\tFILES\tLAST USED\t(%s)\n", root)
		var total int64
		for _, c := range list {
			used := "-"
			if !c.LastUsed.IsZero() {
				used = sbxcli.Human(time.Since(c.LastUsed)) + " ago"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t\n", c.Name, size(c.Bytes), c.Files, used)
			total += c.Bytes
		}
		fmt.Fprintf(tw, "total\t%s\t\t\t\n", size(total))
		tw.Flush()
		return 0
	}
	var cutoff time.Time
	if older != "" {
		d, err := parseAge(older)
		if err != nil {
			return e.Fail(&config.Error{Source: "flags", Key: "--older-than", Msg: err.Error()})
		}
		cutoff = time.Now().Add(-d)
	}
	removed, err := cache.Prune(root, cutoff)
	for _, c := range removed {
		fmt.Fprintf(e.Stdout, "removed %s (%s)\n", c.Name, size(c.Bytes))
	}
	if err != nil {
		return e.Fail(err)
	}
	if len(removed) == 0 {
		fmt.Fprintln(e.Stdout, "nothing to remove")
	}
	return 0
}

// parseAge is a duration with days allowed ("7d").
func parseAge(s string) (time.Duration, error) {
	var n int
	if _, err := fmt.Sscanf(s, "%dd", &n); err == nil && fmt.Sprintf("%dd", n) == s && n >= 0 {
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return config.ParseDuration(s)
}

func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
