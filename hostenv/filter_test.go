package hostenv

import (
	"slices"
	"testing"
)

func TestFilter(t *testing.T) {
	tests := []struct {
		name       string
		key, value string
		global     bool // kept by FilterGlobal
		repo       bool // kept by FilterRepo
	}{
		{"user.name", "user.name", "Me", true, true},
		{"user.email", "user.email", "me@example.com", true, true},
		{"init.defaultbranch", "init.defaultbranch", "main", true, true},
		{"pull.rebase", "pull.rebase", "true", true, true},
		{"push.default", "push.default", "simple", true, true},
		{"core.autocrlf", "core.autocrlf", "input", true, true},
		{"core.eol", "core.eol", "lf", true, true},
		{"core.filemode", "core.filemode", "false", true, true},
		{"core.safecrlf", "core.safecrlf", "warn", true, true},
		{"repo format is repo-only", "core.repositoryformatversion", "1", false, true},
		{"core.bare is repo-only", "core.bare", "false", false, true},
		{"core.logallrefupdates is repo-only", "core.logallrefupdates", "true", false, true},
		{"extensions.objectformat", "extensions.objectformat", "sha256", false, true},
		{"extensions with subsection", "extensions.x.objectformat", "sha256", false, false},
		{"remote url", "remote.origin.url", "https://github.com/me/r.git", false, true},
		{"remote dotted name", "remote.my.fork.url", "git@github.com:me/r.git", false, true},
		{"remote fetch", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*", false, true},
		{"remote pushurl", "remote.origin.pushurl", "ssh://git@host:22/r.git", false, true},
		{"remote without name", "remote.url", "https://x/", false, false},
		{"remote empty name", "remote..url", "https://x/", false, false},
		{"remote proxy", "remote.origin.proxy", "http://proxy", false, false},
		{"remote uploadpack", "remote.origin.uploadpack", "sh -c evil", false, false},
		{"remote receivepack", "remote.origin.receivepack", "sh -c evil", false, false},
		{"branch remote", "branch.main.remote", "origin", false, true},
		{"branch merge", "branch.feature/x.merge", "refs/heads/feature/x", false, true},
		{"branch rebase", "branch.main.rebase", "true", false, true},
		{"branch description", "branch.main.description", "text", false, false},
		{"remote url with password", "remote.origin.url", "https://user:pass@example.com/r.git", false, false},
		{"remote url with token as user", "remote.origin.url", "https://ghp_token@github.com/r.git", false, false},
		{"scp-like with password", "remote.origin.url", "user:pass@host:path/r.git", false, false},
		{"email with password-like text", "user.email", "a:b@c", false, false},
		{"alias", "alias.co", "!sh -c evil", false, false},
		{"core.sshcommand", "core.sshcommand", "ssh -i key", false, false},
		{"core.askpass", "core.askpass", "/bin/x", false, false},
		{"core.hookspath", "core.hookspath", "/tmp/h", false, false},
		{"core.fsmonitor", "core.fsmonitor", "/tmp/m", false, false},
		{"core.worktree", "core.worktree", "/", false, false},
		{"core.editor", "core.editor", "vim", false, false},
		{"core.pager", "core.pager", "less", false, false},
		{"credential.helper", "credential.helper", "store", false, false},
		{"include.path", "include.path", "/x", false, false},
		{"includeif", "includeif.gitdir:/x/.path", "/x", false, false},
		{"http.extraheader", "http.extraheader", "Authorization: x", false, false},
		{"url insteadof", "url.https://github.com/.insteadof", "git@github.com:", false, false},
		{"filter", "filter.lfs.smudge", "git-lfs smudge", false, false},
		{"diff command", "diff.x.command", "evil", false, false},
		{"diff textconv", "diff.x.textconv", "evil", false, false},
		{"merge driver", "merge.x.driver", "evil", false, false},
		{"gpg", "gpg.program", "evil", false, false},
		{"non-canonical case", "User.Name", "Me", false, false},
		{"no section", "name", "Me", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []KV{{Key: tt.key, Value: tt.value}}
			for _, c := range []struct {
				what string
				f    func([]KV) ([]KV, []string)
				want bool
			}{{"FilterGlobal", FilterGlobal, tt.global}, {"FilterRepo", FilterRepo, tt.repo}} {
				kept, dropped := c.f(in)
				if c.want && (!slices.Equal(kept, in) || dropped != nil) {
					t.Errorf("%s: kept %+v dropped %q, want it kept", c.what, kept, dropped)
				}
				if !c.want && (kept != nil || len(dropped) != 1) {
					t.Errorf("%s: kept %+v dropped %q, want it dropped", c.what, kept, dropped)
				}
			}
		})
	}
}

func TestFilterDroppedOnceInOrder(t *testing.T) {
	kept, dropped := FilterRepo([]KV{
		{Key: "alias.co", Value: "a"},
		{Key: "remote.origin.fetch", Value: "f1"},
		{Key: "alias.co", Value: "b"},
		{Key: "remote.origin.fetch", Value: "f2"},
		{Key: "url.https://tok@host/.insteadof", Value: "x"},
		{Key: "credential.https://u:p@host.helper", Value: "x"},
	})
	if want := []KV{{Key: "remote.origin.fetch", Value: "f1"}, {Key: "remote.origin.fetch", Value: "f2"}}; !slices.Equal(kept, want) {
		t.Errorf("kept %+v, want %+v", kept, want)
	}
	if want := []string{"alias.co", "url.<redacted>.insteadof", "credential.<redacted>.helper"}; !slices.Equal(dropped, want) {
		t.Errorf("dropped %q, want %q", dropped, want)
	}
}

func TestHasCredentials(t *testing.T) {
	tests := []struct {
		name, in string
		want     bool
	}{
		{"plain https", "https://github.com/me/r.git", false},
		{"https port", "https://github.com:443/me/r.git", false},
		{"https password", "https://user:pass@github.com/r.git", true},
		{"https empty password", "https://user:@github.com/r.git", true},
		{"https token as user", "https://ghp_abc@github.com/r.git", true},
		{"upper-case scheme token", "HTTPS://tok@github.com/", true},
		{"http token", "http://tok@host/", true},
		{"ftp user", "ftp://u@host/", true},
		{"at in https path", "https://host/a@b", false},
		{"at in https query", "https://host/?a=b@c", false},
		{"ssh user", "ssh://git@github.com/me/r.git", false},
		{"ssh user and port", "ssh://git@github.com:22/me/r.git", false},
		{"ssh password", "ssh://git:pw@github.com/r.git", true},
		{"scp-like", "git@github.com:me/r.git", false},
		{"scp-like password", "user:pass@host:path", true},
		{"embedded URL", "see https://u:p@host/", true},
		{"embedded token URL", "x https://tok@host/", true},
		{"errs towards true", "https://host:443/a@b", true},
		{"email", "me@example.com", false},
		{"refspec", "+refs/heads/*:refs/remotes/origin/*", false},
		{"empty", "", false},
		{"bare scheme", "://a@b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HasCredentials(tt.in); got != tt.want {
				t.Errorf("HasCredentials(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactKey(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "alias.co", "alias.co"},
		{"url subsection", "url.https://github.com/.insteadof", "url.https://github.com/.insteadof"},
		{"token subsection", "url.https://x-access-token:T@github.com/.insteadof", "url.<redacted>.insteadof"},
		{"query subsection", "http.https://h/?token=T.extraheader", "http.<redacted>.extraheader"},
		{"credentials outside subsection", "a:b.c.d@e", "<redacted>"},
		{"two-level with credentials", "a:b.c@d", "<redacted>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redactKey(tt.in); got != tt.want {
				t.Errorf("redactKey(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
