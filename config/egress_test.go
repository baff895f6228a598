package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// allow_net, inject, cache and host_caches: values from each source, and bad
// input refused with an error naming the key and the source.
func TestEgressAndCacheKeys(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none.toml")
	user := writeFile(t, "allow_net = [\"proxy.example\", \"*.sum.example:8443\"]\ncache = \"session\"\nhost_caches = [\"go-mod\"]\n"+
		"[[inject]]\nhost = \"proxy.example\"\nheader = \"Authorization\"\nprefix = \"Bearer \"\nenv = \"TOKEN\"\n")
	cfg, err := Load(Sources{UserFile: user, Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.AllowNet, ",") != "proxy.example,*.sum.example:8443" || cfg.Cache != "session" || strings.Join(cfg.HostCaches, ",") != "go-mod" ||
		len(cfg.Inject) != 1 || cfg.Inject[0].Host != "proxy.example" || cfg.Inject[0].Env != "TOKEN" || cfg.Inject[0].Prefix != "Bearer " {
		t.Fatalf("got %+v", cfg)
	}
	cfg, err = Load(Sources{UserFile: user, Env: []string{"SBX_ALLOW_NET=a.example, b.example:8080"}})
	if err != nil || strings.Join(cfg.AllowNet, ",") != "a.example,b.example:8080" {
		t.Fatalf("SBX_ALLOW_NET: %v %v", cfg.AllowNet, err)
	}
	// A project may list fewer hosts, never others.
	cfg, err = Load(Sources{UserFile: user, ProjectFile: writeFile(t, "allow_net = [\"proxy.example\"]\ncache = \"none\"\n"), Env: []string{}})
	if err != nil || strings.Join(cfg.AllowNet, ",") != "proxy.example" || cfg.Cache != "none" {
		t.Fatalf("narrowing project: %v %v", cfg, err)
	}
	c := Defaults()
	if err := c.SetFlagList("--allow-net", []string{"x.example", "10.0.0.1:9000"}); err != nil || strings.Join(c.AllowNet, ",") != "x.example,10.0.0.1:9000" {
		t.Fatalf("--allow-net: %v %v", c.AllowNet, err)
	}
	for _, tc := range []struct {
		name, user, project, env, key, source, msg string
	}{
		{name: "malformed glob in the file", user: "allow_net = [\"a.*.example\"]\n", key: "allow_net", source: "user", msg: "'*' is only allowed"},
		{name: "port out of range in the environment", env: "SBX_ALLOW_NET=a.example:70000", key: "SBX_ALLOW_NET", source: "environment", msg: "out of range"},
		{name: "a top-level glob", env: "SBX_ALLOW_NET=*.com", key: "SBX_ALLOW_NET", source: "environment", msg: "top-level"},
		{name: "the project widens allow_net", user: "allow_net = [\"a.example\"]\n", project: "allow_net = [\"evil.example\"]\n", key: "allow_net", source: "project", msg: "may only narrow"},
		{name: "the project sets allow_net from none", project: "allow_net = [\"evil.example\"]\n", key: "allow_net", source: "project", msg: "may only narrow"},
		{name: "the project injects", project: "[[inject]]\nhost = \"a\"\nheader = \"X\"\nenv = \"E\"\n", key: "inject", source: "project", msg: "may only narrow"},
		{name: "the project widens cache", user: "cache = \"session\"\n", project: "cache = \"shared\"\n", key: "cache", source: "project", msg: "may only narrow"},
		{name: "the project adds a host cache", project: "host_caches = [\"go-mod\"]\n", key: "host_caches", source: "project", msg: "may only narrow"},
		{name: "inject without a value source", user: "[[inject]]\nhost = \"a.example\"\nheader = \"Authorization\"\n", key: "inject", source: "user", msg: "exactly one of env"},
		{name: "inject with an unknown field", user: "[[inject]]\nhost = \"a.example\"\nheader = \"A\"\nenv = \"E\"\nvalue = \"s\"\n", key: "inject", source: "user", msg: "unknown field \"value\""},
		{name: "inject as a string", user: "inject = \"a\"\n", key: "inject", source: "user", msg: "[[inject]] tables"},
		{name: "inject with a relative file", user: "[[inject]]\nhost = \"a.example\"\nheader = \"A\"\nfile = \"tok\"\n", key: "inject", source: "user", msg: "not an absolute path"},
		{name: "an unknown cache mode", env: "SBX_CACHE=global", key: "SBX_CACHE", source: "environment", msg: "\"global\""},
		{name: "an unknown host cache", user: "host_caches = [\"npm\"]\n", key: "host_caches", source: "user", msg: "unknown host cache \"npm\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := Sources{UserFile: none, Env: []string{}}
			if tc.user != "" {
				src.UserFile = writeFile(t, tc.user)
			}
			if tc.project != "" {
				src.ProjectFile = writeFile(t, tc.project)
			}
			if tc.env != "" {
				src.Env = []string{tc.env}
			}
			_, err := Load(src)
			var ce *Error
			if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want a *config.Error naming %s and saying %q", err, tc.key, tc.msg)
			}
			want := map[string]string{"user": src.UserFile, "project": src.ProjectFile, "environment": "environment"}[tc.source]
			if ce.Source != want {
				t.Fatalf("source %q, want %q", ce.Source, want)
			}
		})
	}
	if err := c.SetFlagList("--allow-net", []string{"bad host"}); err == nil || !strings.Contains(err.Error(), "--allow-net") {
		t.Fatalf("a bad --allow-net: %v", err)
	}
}
