package hostenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// requireGit fails the test, rather than skipping it, when git is missing.
func requireGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("these tests run the real git: install git (%v)", err)
	}
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func unsetenv(t *testing.T, name string) {
	t.Helper()
	t.Setenv(name, "") // registers the restore
	os.Unsetenv(name)
}

const globalConfig = `[user]
	name = Test User
	email = test@example.com
[credential]
	helper = store
[url "https://x-access-token:SECRET_URL_TOKEN@github.com/"]
	insteadOf = https://github.com/
[alias]
	co = !sh -c SECRET_ALIAS_EVIL
[core]
	sshCommand = ssh -i /home/me/.ssh/SECRET_SSH_KEY
	autocrlf = input
[include]
	path = /home/me/SECRET_INCLUDE
[init]
	defaultBranch = main
`

const xdgConfig = `[user]
	name = XDG User
[http]
	extraHeader = Authorization: Bearer SECRET_HEADER
`

const repoConfig = `[core]
	repositoryformatversion = 1
	filemode = true
	bare = false
	logallrefupdates = true
	hooksPath = /tmp/SECRET_HOOKS
	fsmonitor = SECRET_FSMONITOR
	worktree = /SECRET_WORKTREE
[extensions]
	objectformat = sha256
[remote "origin"]
	url = https://user:SECRET_PASS@example.com/r.git
	fetch = +refs/heads/*:refs/remotes/origin/*
	fetch = +refs/tags/*:refs/tags/*
[remote "fork"]
	url = git@github.com:me/r.git
	pushurl = https://SECRET_TOKEN_AS_USER@github.com/me/r.git
[remote "my.fork"]
	url = https://github.com/me/r.git
[branch "main"]
	remote = origin
	merge = refs/heads/main
	rebase
[filter "lfs"]
	smudge = SECRET_FILTER
[diff "x"]
	textconv = SECRET_TEXTCONV
[merge "y"]
	driver = SECRET_DRIVER
[gpg]
	program = SECRET_GPG
`

func TestReadAndFilter(t *testing.T) {
	requireGit(t)
	ctx := context.Background()
	home := t.TempDir()
	t.Setenv("HOME", home)
	unsetenv(t, "XDG_CONFIG_HOME")
	unsetenv(t, "GIT_CONFIG_GLOBAL")
	writeFile(t, filepath.Join(home, ".gitconfig"), globalConfig)
	writeFile(t, filepath.Join(home, ".config", "git", "config"), xdgConfig)
	writeFile(t, filepath.Join(home, "SECRET_INCLUDE"), "[user]\n\tsigningkey = SECRET_INCLUDED\n")
	repo := filepath.Join(t.TempDir(), ".git", "config")
	writeFile(t, repo, repoConfig)

	global, err := ReadGlobalConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keptGlobal, droppedGlobal := FilterGlobal(global)
	wantGlobal := []KV{
		{Key: "user.name", Value: "XDG User"}, // XDG file first, as git reads it
		{Key: "user.name", Value: "Test User"},
		{Key: "user.email", Value: "test@example.com"},
		{Key: "core.autocrlf", Value: "input"},
		{Key: "init.defaultbranch", Value: "main"},
	}
	if !slices.Equal(keptGlobal, wantGlobal) {
		t.Errorf("global kept = %+v\nwant %+v", keptGlobal, wantGlobal)
	}
	wantDroppedGlobal := []string{"http.extraheader", "credential.helper", "url.<redacted>.insteadof", "alias.co", "core.sshcommand", "include.path"}
	if !slices.Equal(droppedGlobal, wantDroppedGlobal) {
		t.Errorf("global dropped = %q\nwant %q", droppedGlobal, wantDroppedGlobal)
	}

	kvs, err := ReadConfig(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	keptRepo, droppedRepo := FilterRepo(kvs)
	wantRepo := []KV{
		{Key: "core.repositoryformatversion", Value: "1"},
		{Key: "core.filemode", Value: "true"},
		{Key: "core.bare", Value: "false"},
		{Key: "core.logallrefupdates", Value: "true"},
		{Key: "extensions.objectformat", Value: "sha256"},
		{Key: "remote.origin.fetch", Value: "+refs/heads/*:refs/remotes/origin/*"},
		{Key: "remote.origin.fetch", Value: "+refs/tags/*:refs/tags/*"},
		{Key: "remote.fork.url", Value: "git@github.com:me/r.git"},
		{Key: "remote.my.fork.url", Value: "https://github.com/me/r.git"},
		{Key: "branch.main.remote", Value: "origin"},
		{Key: "branch.main.merge", Value: "refs/heads/main"},
		{Key: "branch.main.rebase", NoValue: true},
	}
	if !slices.Equal(keptRepo, wantRepo) {
		t.Errorf("repo kept = %+v\nwant %+v", keptRepo, wantRepo)
	}
	wantDroppedRepo := []string{"core.hookspath", "core.fsmonitor", "core.worktree", "remote.origin.url", "remote.fork.pushurl",
		"filter.lfs.smudge", "diff.x.textconv", "merge.y.driver", "gpg.program"}
	if !slices.Equal(droppedRepo, wantDroppedRepo) {
		t.Errorf("repo dropped = %q\nwant %q", droppedRepo, wantDroppedRepo)
	}

	for _, kept := range [][]KV{keptGlobal, keptRepo} {
		text, err := Render(kept)
		if err != nil {
			t.Fatal(err)
		}
		all := text + strings.Join(droppedGlobal, "\n") + strings.Join(droppedRepo, "\n")
		if strings.Contains(all, "SECRET") {
			t.Errorf("a secret reached the output:\n%s", all)
		}
		for _, kv := range kept {
			_, _, name, _ := splitKey(kv.Key)
			if !strings.Contains(text, "\t"+name) {
				t.Errorf("rendered config lacks %s:\n%s", kv.Key, text)
			}
		}
		back := filepath.Join(t.TempDir(), "config")
		writeFile(t, back, text)
		got, err := ReadConfig(ctx, back)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, kept) {
			t.Errorf("read back %+v\nwant %+v", got, kept)
		}
	}
}

func TestReadConfigErrors(t *testing.T) {
	requireGit(t)
	ctx := context.Background()
	dir := t.TempDir()

	t.Run("missing file is empty", func(t *testing.T) {
		kvs, err := ReadConfig(ctx, filepath.Join(dir, "nope"))
		if kvs != nil || err != nil {
			t.Fatalf("got %+v, %v; want nil, nil", kvs, err)
		}
	})
	t.Run("empty file", func(t *testing.T) {
		p := filepath.Join(dir, "empty")
		writeFile(t, p, "")
		kvs, err := ReadConfig(ctx, p)
		if kvs != nil || err != nil {
			t.Fatalf("got %+v, %v; want nil, nil", kvs, err)
		}
	})
	t.Run("syntax error", func(t *testing.T) {
		p := filepath.Join(dir, "bad")
		writeFile(t, p, "[user\n\tname = x SECRET_IN_BAD_FILE\n")
		_, err := ReadConfig(ctx, p)
		if err == nil || !strings.Contains(err.Error(), "bad config line 1") {
			t.Fatalf("err = %v, want git's bad config line error", err)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Fatalf("error quotes the file: %v", err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		if _, err := ReadConfig(ctx, dir); err == nil {
			t.Fatal("no error for a directory")
		}
	})
	t.Run("includes not followed", func(t *testing.T) {
		inc := filepath.Join(dir, "inc")
		writeFile(t, inc, "[user]\n\tname = included\n")
		p := filepath.Join(dir, "withinclude")
		writeFile(t, p, "[include]\n\tpath = "+inc+"\n[includeIf \"gitdir:/\"]\n\tpath = "+inc+"\n")
		kvs, err := ReadConfig(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		want := []KV{{Key: "include.path", Value: inc}, {Key: "includeif.gitdir:/.path", Value: inc}}
		if !slices.Equal(kvs, want) {
			t.Fatalf("got %+v, want %+v", kvs, want)
		}
	})
	t.Run("host GIT_ variables ignored", func(t *testing.T) {
		p := filepath.Join(dir, "plain")
		writeFile(t, p, "[user]\n\tname = plain\n")
		t.Setenv("GIT_CONFIG_COUNT", "1")
		t.Setenv("GIT_CONFIG_KEY_0", "user.name")
		t.Setenv("GIT_CONFIG_VALUE_0", "injected")
		t.Setenv("GIT_CONFIG_PARAMETERS", "'user.email'='injected'")
		kvs, err := ReadConfig(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if want := []KV{{Key: "user.name", Value: "plain"}}; !slices.Equal(kvs, want) {
			t.Fatalf("got %+v, want %+v", kvs, want)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		p := filepath.Join(dir, "plain2")
		writeFile(t, p, "[user]\n\tname = plain\n")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := ReadConfig(cctx, p); err == nil {
			t.Fatal("no error with a cancelled context")
		}
	})
	t.Run("git missing", func(t *testing.T) {
		p := filepath.Join(dir, "plain3")
		writeFile(t, p, "[user]\n\tname = plain\n")
		t.Setenv("PATH", t.TempDir())
		_, err := ReadConfig(ctx, p)
		if err == nil || !strings.Contains(err.Error(), "install git") {
			t.Fatalf("err = %v, want ErrGitNotFound", err)
		}
	})
}

func TestParseListOutput(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    []KV
		wantErr string
	}{
		{name: "empty"},
		{name: "value and no value", out: "a.b\nv\x00a.c\x00a.d\n\x00",
			want: []KV{{Key: "a.b", Value: "v"}, {Key: "a.c", NoValue: true}, {Key: "a.d"}}},
		{name: "value with newline", out: "a.b\nx\ny\x00", want: []KV{{Key: "a.b", Value: "x\ny"}}},
		{name: "dotted subsection", out: "remote.my.fork.url\nu\x00", want: []KV{{Key: "remote.my.fork.url", Value: "u"}}},
		{name: "trailing data", out: "a.b\nv\x00a.c", wantErr: "trailing data"},
		{name: "no section", out: "ab\nv\x00", wantErr: "no section"},
		{name: "upper-case name", out: "a.bC\nv\x00", wantErr: "name has 'C'"},
		{name: "empty name", out: "a.\nv\x00", wantErr: "name must start"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseList([]byte(tt.out))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestGlobalConfigPaths(t *testing.T) {
	tests := []struct {
		name                 string
		home, xdg, gitGlobal *string
		want                 []string
	}{
		{name: "home only", home: ptr("/h"), want: []string{"/h/.config/git/config", "/h/.gitconfig"}},
		{name: "xdg set", home: ptr("/h"), xdg: ptr("/x"), want: []string{"/x/git/config", "/h/.gitconfig"}},
		{name: "GIT_CONFIG_GLOBAL alone", home: ptr("/h"), xdg: ptr("/x"), gitGlobal: ptr("/g"), want: []string{"/g"}},
		{name: "GIT_CONFIG_GLOBAL empty", home: ptr("/h"), gitGlobal: ptr(""), want: nil},
		{name: "no home", xdg: ptr("/x"), want: []string{"/x/git/config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for name, v := range map[string]*string{"HOME": tt.home, "XDG_CONFIG_HOME": tt.xdg, "GIT_CONFIG_GLOBAL": tt.gitGlobal} {
				if v == nil {
					unsetenv(t, name)
				} else {
					t.Setenv(name, *v)
				}
			}
			if got := GlobalConfigPaths(); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }
