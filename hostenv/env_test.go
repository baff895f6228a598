package hostenv

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

var hostEnv = []string{
	"PATH=/usr/bin",
	"HOME=/home/me",
	"GITHUB_TOKEN=ghp_FAKEFAKEFAKE",
	"AWS_SECRET_ACCESS_KEY=FAKESECRET",
	"AWS_REGION=eu-west-1",
	"AWS_PROFILE=dev",
	"NPM_TOKEN=npm_FAKE",
	"NPM_CONFIG_REGISTRY=https://registry.example",
	"LANG=C.UTF-8",
	"LC_ALL=C.UTF-8",
	"LD_PRELOAD=/tmp/evil.so",
	"SSH_AUTH_SOCK=/tmp/ssh-agent.sock",
	"GIT_DIR=/elsewhere",
	"GIT_CONFIG_GLOBAL=/elsewhere/config",
	"GIT_SSH_COMMAND=ssh -i key",
	"GIT_AUTHOR_NAME=Me",
	"SBX_BACKEND=cluster",
	"AGENT_SANDBOX_FORWARD_ENV=*",
	"BASH_ENV=/tmp/evil.sh",
	"lower_case=ok",
	"1BAD=x",
	"BAD-NAME=x",
	"NOEQUALS",
	"=novalue",
	"NUL=a\x00b",
	"DUP=first",
	"DUP=second",
}

func TestForward(t *testing.T) {
	tests := []struct {
		name          string
		forward, skip []string
		want, refused []string
		wantErr       string
	}{
		{name: "nil forward forwards nothing"},
		{name: "empty forward forwards nothing", forward: []string{}},
		{name: "secrets not forwarded unless named", forward: []string{"AWS_REGION", "NPM_CONFIG_REGISTRY"},
			want: []string{"AWS_REGION=eu-west-1", "NPM_CONFIG_REGISTRY=https://registry.example"}},
		{name: "named secrets are forwarded", forward: []string{"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"},
			want: []string{"GITHUB_TOKEN=ghp_FAKEFAKEFAKE", "AWS_SECRET_ACCESS_KEY=FAKESECRET"}},
		{name: "glob", forward: []string{"AWS_*"},
			want: []string{"AWS_SECRET_ACCESS_KEY=FAKESECRET", "AWS_REGION=eu-west-1", "AWS_PROFILE=dev"}},
		{name: "skip wins over forward", forward: []string{"AWS_*", "NPM_*"}, skip: []string{"*_SECRET_*", "NPM_TOKEN"},
			want: []string{"AWS_REGION=eu-west-1", "AWS_PROFILE=dev", "NPM_CONFIG_REGISTRY=https://registry.example"}},
		{name: "alternation", forward: []string{"AWS_{REGION,PROFILE}"},
			want: []string{"AWS_REGION=eu-west-1", "AWS_PROFILE=dev"}},
		{name: "case-sensitive", forward: []string{"aws_region", "LOWER_CASE"}},
		{name: "exact name is not a prefix", forward: []string{"AWS"}},
		{name: "locale may be forwarded", forward: []string{"LANG", "LC_*"},
			want: []string{"LANG=C.UTF-8", "LC_ALL=C.UTF-8"}},
		{name: "git identity may be forwarded", forward: []string{"GIT_AUTHOR_NAME"}, want: []string{"GIT_AUTHOR_NAME=Me"}},
		{name: "reserved names refused", forward: []string{"PATH", "HOME", "LD_PRELOAD", "SSH_AUTH_SOCK", "GIT_DIR", "GIT_CONFIG_GLOBAL", "GIT_SSH_COMMAND", "SBX_BACKEND", "AGENT_SANDBOX_FORWARD_ENV", "BASH_ENV"},
			refused: []string{"PATH", "HOME", "LD_PRELOAD", "SSH_AUTH_SOCK", "GIT_DIR", "GIT_CONFIG_GLOBAL", "GIT_SSH_COMMAND", "SBX_BACKEND", "AGENT_SANDBOX_FORWARD_ENV", "BASH_ENV"}},
		{name: "star forwards all but reserved, invalid and NUL", forward: []string{"*"}, skip: []string{"AWS_*", "NPM_*", "GITHUB_*", "L*"},
			want:    []string{"GIT_AUTHOR_NAME=Me", "lower_case=ok", "DUP=second"},
			refused: []string{"PATH", "HOME", "SSH_AUTH_SOCK", "GIT_DIR", "GIT_CONFIG_GLOBAL", "GIT_SSH_COMMAND", "SBX_BACKEND", "AGENT_SANDBOX_FORWARD_ENV", "BASH_ENV"}},
		{name: "skipped reserved name is not reported", forward: []string{"PATH"}, skip: []string{"PATH"}},
		{name: "invalid names and NUL values dropped", forward: []string{"1BAD", "NUL", "NOEQUALS"}},
		{name: "duplicate: last value wins", forward: []string{"DUP"}, want: []string{"DUP=second"}},
		{name: "empty pattern", forward: []string{""}, wantErr: `forward pattern "": invalid environment name pattern: empty`},
		{name: "unbalanced bracket", forward: []string{"AWS_[A"}, wantErr: `forward pattern "AWS_[A": invalid environment name pattern: malformed glob`},
		{name: "unbalanced brace in skip", forward: []string{"*"}, skip: []string{"{A,B"}, wantErr: `skip pattern "{A,B": invalid`},
		{name: "equals sign", forward: []string{"A=B"}, wantErr: `forward pattern "A=B": invalid environment name pattern: character '='`},
		{name: "slash", forward: []string{"A/B"}, wantErr: `character '/'`},
		{name: "backslash escape", forward: []string{`A\*`}, wantErr: `character '\\'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, refused, err := Forward(hostEnv, tt.forward, tt.skip)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalidPattern) {
					t.Fatalf("err = %v, want ErrInvalidPattern containing %q", err, tt.wantErr)
				}
				if env != nil || refused != nil {
					t.Fatalf("error with results: %q %q", env, refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(env, tt.want) {
				t.Errorf("env = %q, want %q", env, tt.want)
			}
			if !slices.Equal(refused, tt.refused) {
				t.Errorf("refused = %q, want %q", refused, tt.refused)
			}
		})
	}
}

func TestReserved(t *testing.T) {
	for _, name := range []string{"PATH", "HOME", "SHELL", "USER", "LOGNAME", "PWD", "OLDPWD", "TERM", "TMPDIR",
		"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "DYLD_INSERT_LIBRARIES", "BASH_ENV", "ENV", "SSH_AUTH_SOCK",
		"GIT_DIR", "GIT_WORK_TREE", "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_COUNT", "GIT_EXEC_PATH",
		"GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS", "GIT_INDEX_FILE", "SBX_X", "AGENT_SANDBOX_X", "XDG_CONFIG_HOME"} {
		if !Reserved(name) {
			t.Errorf("Reserved(%q) = false", name)
		}
	}
	for _, name := range []string{"LANG", "LC_ALL", "TZ", "GITHUB_TOKEN", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "NPM_TOKEN", "GITX"} {
		if Reserved(name) {
			t.Errorf("Reserved(%q) = true", name)
		}
	}
}

func TestParseList(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"blanks only", " ,\t, ", nil},
		{"commas", "A,B,C", []string{"A", "B", "C"}},
		{"spaces", "A B\tC\nD", []string{"A", "B", "C", "D"}},
		{"mixed", " NPM_*, AWS_REGION ,,GITHUB_TOKEN ", []string{"NPM_*", "AWS_REGION", "GITHUB_TOKEN"}},
		{"comma splits a brace group (Forward then refuses both halves)", "AWS_{A,B}", []string{"AWS_{A", "B}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseList(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("ParseList(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
