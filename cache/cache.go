// Package cache is sbx's package caches: directories on the host, under
// $XDG_CACHE_HOME/sbx/, mounted read-write in each local sandbox at the
// places the tools use (Go's module and build caches, npm's, pip's, cargo's
// and a generic ~/.cache) with their variables set, so that a second
// session does not download and build everything again.
//
// Trust: a shared cache is shared by the user's sessions, so one session
// can put into it what another later reads (as on the user's own machine).
// Go's module cache is checked against go.sum by the go command; the build
// caches are not checked by anyone. Mode "session" gives each session
// caches of its own, removed with it. The host's own Go module cache can be
// added read-only (host_caches = ["go-mod"]) as a GOPROXY of files.
package cache

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sbx-sh/sbx/internal/rmtree"
	"github.com/sbx-sh/sbx/sandbox"
)

// Kind is one cache: its directory name on the host, where it is mounted
// in the sandbox, and the variables that point the tools at it.
type Kind struct {
	Name   string
	Target string
	Env    []string
}

// Kinds are the caches, in the order they are mounted (a parent before
// the caches inside it).
var Kinds = []Kind{
	{Name: "cache", Target: sandbox.Home + "/.cache", Env: []string{"XDG_CACHE_HOME=" + sandbox.Home + "/.cache",
		"GOCACHE=" + sandbox.Home + "/.cache/go-build", "PIP_CACHE_DIR=" + sandbox.Home + "/.cache/pip"}},
	{Name: "go-mod", Target: sandbox.Home + "/go/pkg/mod", Env: []string{"GOMODCACHE=" + sandbox.Home + "/go/pkg/mod"}},
	{Name: "npm", Target: sandbox.Home + "/.npm", Env: []string{"npm_config_cache=" + sandbox.Home + "/.npm"}},
	{Name: "cargo", Target: sandbox.Home + "/.cargo", Env: []string{"CARGO_HOME=" + sandbox.Home + "/.cargo"}},
}

// HostGoModTarget is where the host's Go module cache appears, read-only.
const HostGoModTarget = "/var/cache/sbx/host-go-mod"

// stampOf is the file touched beside a cache directory each time a sandbox
// mounts it (`sbx cache prune --older-than` goes by it): beside, not in,
// where the sandbox could make it a symlink to a host file.
func stampOf(dir string) string {
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".used")
}

// Root is $XDG_CACHE_HOME/sbx, else ~/.cache/sbx.
func Root() (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		if !filepath.IsAbs(d) {
			return "", fmt.Errorf("XDG_CACHE_HOME=%q is not an absolute path", d)
		}
		return filepath.Join(d, "sbx"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the cache directory: %w (set XDG_CACHE_HOME)", err)
	}
	return filepath.Join(home, ".cache", "sbx"), nil
}

// Config is what Plan is told.
type Config struct {
	// Mode is "shared", "session" or "none".
	Mode string
	// Root is the shared caches' root (Root()).
	Root string
	// HostCaches are the host caches to mount read-only ("go-mod").
	HostCaches []string
	// HostGoModCache is the host's Go module cache (go env GOMODCACHE);
	// HostGoProxy the host's GOPROXY, after which the sandbox's goes on.
	HostGoModCache, HostGoProxy string
}

// Plan returns the mounts and variables of the caches of a sandbox with
// state directory stateDir, whose user is the host's uid:gid, creating the
// directories it needs. A uid other than this process's (sbx as root maps
// each sandbox to an id of its own) gets caches of its own under
// uid-<uid>, owned by it: sandboxes of different ids never write each
// other's files.
func Plan(c Config, stateDir string, uid, gid int) ([]sandbox.Mount, []string, error) {
	var mounts []sandbox.Mount
	var env []string
	if c.Mode != "none" {
		base := filepath.Join(stateDir, "cache")
		if c.Mode == "shared" {
			base = c.Root
			if uid != os.Geteuid() {
				base = filepath.Join(c.Root, "uid-"+strconv.Itoa(uid))
			}
		}
		// The base is the host's only way to what the sandbox wrote (a
		// setuid binary of its host uid, say): no other host user may
		// reach it (0700, owned by this process).
		if err := privateDir(base); err != nil {
			return nil, nil, err
		}
		for _, k := range Kinds {
			dir := filepath.Join(base, k.Name)
			if err := makeDir(dir, uid, gid); err != nil {
				return nil, nil, err
			}
			if c.Mode == "shared" {
				touch(stampOf(dir))
			}
			mounts = append(mounts, sandbox.Mount{Source: dir, Target: k.Target})
			env = append(env, k.Env...)
		}
	}
	for _, h := range c.HostCaches {
		switch h {
		case "go-mod":
			dl := filepath.Join(c.HostGoModCache, "cache", "download")
			if c.HostGoModCache == "" || !isDir(dl) {
				return nil, nil, fmt.Errorf("host_caches: go-mod: the host's Go module cache %q has no cache/download directory (is Go installed and has it downloaded modules? `go env GOMODCACHE`)", c.HostGoModCache)
			}
			mounts = append(mounts, sandbox.Mount{Source: dl, Target: HostGoModTarget, ReadOnly: true})
			proxy := c.HostGoProxy
			if proxy == "" {
				proxy = "https://proxy.golang.org,direct"
			}
			env = append(env, "GOPROXY=file://"+HostGoModTarget+","+withoutCredentials(proxy))
		default:
			return nil, nil, fmt.Errorf("host_caches: unknown host cache %q", h)
		}
	}
	return mounts, env, nil
}

// withoutCredentials is a GOPROXY list (entries separated by "," or "|")
// with the userinfo of each URL taken out: a private proxy written as
// https://user:token@host/ must not put the token into the sandbox's
// environment (which holds no host secret). An entry with an "@" that does
// not parse as a URL is left out whole.
func withoutCredentials(list string) string {
	var b strings.Builder
	start := 0
	for i := 0; i <= len(list); i++ {
		if i < len(list) && list[i] != ',' && list[i] != '|' {
			continue
		}
		entry := list[start:i]
		if strings.Contains(entry, "@") {
			u, err := url.Parse(entry)
			switch {
			case err != nil || u.Host == "":
				entry = ""
			default:
				u.User = nil
				entry = u.String()
			}
		}
		if entry != "" {
			if b.Len() > 0 {
				b.WriteByte(list[start-1])
			}
			b.WriteString(entry)
		}
		start = i + 1
	}
	return b.String()
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create cache %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("make cache %s private (mode 0700): %w", dir, err)
	}
	return nil
}

func makeDir(dir string, uid, gid int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create cache %s: %w", dir, err)
	}
	if uid != os.Geteuid() {
		// The directory only: what is inside was written by that id.
		if err := os.Lchown(dir, uid, gid); err != nil {
			return fmt.Errorf("give cache %s to the sandbox's uid %d: %w", dir, uid, err)
		}
	}
	return nil
}

func touch(p string) {
	now := time.Now()
	if err := os.Chtimes(p, now, now); errors.Is(err, fs.ErrNotExist) {
		if f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644); err == nil {
			f.Close()
		}
	}
}

// Entry is one cache directory on the host.
type Entry struct {
	// Name is its path below Root ("go-mod", "uid-1000000001/npm").
	Name     string
	Path     string
	Bytes    int64
	Files    int
	LastUsed time.Time // zero when never stamped
}

// List returns the shared caches under root with their sizes.
func List(root string) ([]Entry, error) {
	var out []Entry
	dirs, err := cacheDirs(root)
	if err != nil {
		return nil, err
	}
	for _, name := range dirs {
		p := filepath.Join(root, name)
		e := Entry{Name: name, Path: p}
		filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if !d.IsDir() {
				if info, err := d.Info(); err == nil {
					e.Bytes += info.Size()
					e.Files++
				}
			}
			return nil
		})
		if fi, err := os.Lstat(stampOf(p)); err == nil {
			e.LastUsed = fi.ModTime()
		}
		out = append(out, e)
	}
	return out, nil
}

// cacheDirs are the names of the cache directories below root: the
// kinds, and the kinds below each uid-N.
func cacheDirs(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read caches: %w", err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if isKind(e.Name()) {
			out = append(out, e.Name())
			continue
		}
		if strings.HasPrefix(e.Name(), "uid-") {
			sub, _ := os.ReadDir(filepath.Join(root, e.Name()))
			for _, s := range sub {
				if s.IsDir() && isKind(s.Name()) {
					out = append(out, e.Name()+"/"+s.Name())
				}
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

func isKind(name string) bool {
	for _, k := range Kinds {
		if k.Name == name {
			return true
		}
	}
	return false
}

// Prune removes the shared caches under root last used before cutoff (all
// of them when cutoff is zero), each whole: a part of a Go module
// directory would be taken for the whole module. A cache a running
// sandbox has mounted is removed from the host all the same; that sandbox
// keeps what it has open and refills the rest.
func Prune(root string, cutoff time.Time) ([]Entry, error) {
	list, err := List(root)
	if err != nil {
		return nil, err
	}
	var removed []Entry
	for _, e := range list {
		if !cutoff.IsZero() && !e.LastUsed.IsZero() && !e.LastUsed.Before(cutoff) {
			continue
		}
		if err := Remove(e.Path); err != nil {
			return removed, fmt.Errorf("remove cache %s: %w", e.Path, err)
		}
		os.Remove(stampOf(e.Path))
		removed = append(removed, e)
	}
	return removed, nil
}

// Remove is os.RemoveAll for trees a sandbox wrote, whose directories may
// be read-only (Go's module cache makes its directories 0555; a sandbox
// may make any of its directories so, or unreadable) and of any depth:
// prune's, the session's removal of the caches of cache = "session" in its
// state dir, and of a lost sandbox's workspace. It is internal/rmtree's:
// through descriptors, never following a link (a sandbox that swaps a
// directory for a symlink while this runs cannot lead it to a host file),
// in time linear in the entries and with a bounded number of descriptors
// whatever the depth. A missing p is no error; a p that is not a directory
// (a file, a symlink) is removed itself.
func Remove(p string) error { return rmtree.Path(p) }
