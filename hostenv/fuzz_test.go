package hostenv

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// kvsFromFuzz turns fuzz input into entries: records separated by \x1e,
// fields by \x1f. canonical maps the section and name onto git's key
// alphabet so that every entry is renderable; otherwise keys stay raw.
func kvsFromFuzz(data string, canonical bool) []KV {
	var kvs []KV
	for i, rec := range strings.Split(data, "\x1e") {
		if i == 32 {
			break
		}
		f := strings.SplitN(rec, "\x1f", 4)
		for len(f) < 4 {
			f = append(f, "")
		}
		flags, key, value := f[0], "", f[3]
		if canonical {
			section := keyAlphabet(f[1], false)
			sub, name := f[2], keyAlphabet(f[2]+f[1], true)
			sub = strings.NewReplacer("\n", "", "\x00", "").Replace(sub)
			key = section + "." + name
			if strings.Contains(flags, "s") {
				key = section + "." + sub + "." + name
			}
			value = strings.ReplaceAll(value, "\x00", "")
		} else {
			key = f[1]
		}
		kv := KV{Key: key, Value: value}
		if strings.Contains(flags, "n") {
			kv = KV{Key: key, NoValue: true}
		}
		kvs = append(kvs, kv)
	}
	return kvs
}

func keyAlphabet(s string, name bool) string {
	const letters, rest = "abcdefghijklmnopqrstuvwxyz", "0123456789-"
	var b strings.Builder
	for i := 0; i < len(s) && i < 12; i++ {
		if i == 0 && name {
			b.WriteByte(letters[int(s[i])%len(letters)])
			continue
		}
		alpha := letters + rest
		b.WriteByte(alpha[int(s[i])%len(alpha)])
	}
	if b.Len() == 0 {
		return "a"
	}
	return b.String()
}

func FuzzRender(f *testing.F) {
	f.Add("s\x1fremote\x1fmy.fork\x1fgit@h:r\x1e\x1fuser\x1fname\x1fMe")
	f.Add("sn\x1fbranch\x1fmain\x1f\x1e\x1fcore\x1f\x1f")
	f.Add("s\x1fx\x1fa\"b\\c\r\x1fq\"b\\n\nt\tx\by\r")
	f.Add("\x1fa\x1fb\x1f  # ; \x1e\x1fa\x1fb\x1f\xff\x01\x7f")
	requireGit(f)
	f.Fuzz(func(t *testing.T, data string) {
		roundTrip(t, kvsFromFuzz(data, true))
	})
}

var (
	globalKeyRE = regexp.MustCompile(`^(user\.name|user\.email|init\.defaultbranch|pull\.rebase|push\.default|core\.(autocrlf|eol|filemode|safecrlf))$`)
	repoKeyRE   = regexp.MustCompile(`^(?s:core\.(repositoryformatversion|bare|logallrefupdates)|extensions\.[a-z][a-z0-9-]*|remote\..+\.(url|fetch|pushurl)|branch\..+\.(remote|merge|rebase))$`)
	// user:password@ in a URL or in scp-like syntax: a password cannot hold "/".
	passwordRE = regexp.MustCompile(`:[^/@]*@`)
)

func FuzzFilter(f *testing.F) {
	f.Add("\x1fuser.name\x1f\x1fMe\x1e\x1fremote.origin.url\x1f\x1fhttps://u:p@h/r\x1e\x1fremote.my.fork.url\x1f\x1fgit@h:r")
	f.Add("\x1fremote.o.pushurl\x1f\x1fhttps://tok@github.com/\x1e\x1fbranch.main.rebase\x1f\x1f\x1en\x1fcore.bare")
	f.Add("\x1furl.https://x-access-token:S@github.com/.insteadof\x1f\x1fhttps://github.com/\x1e\x1falias.co\x1f\x1f!sh")
	f.Add("\x1fextensions.objectformat\x1f\x1fsha256\x1e\x1fextensions.a.b\x1f\x1fx\x1e\x1fUser.Name\x1f\x1fx")
	f.Add("\x1fuser.email\x1f\x1fu:p@h:path\x1e\x1fremote.x.url\x1f\x1fssh://git@h:22/r\x1e\x1fcore.sshcommand\x1f\x1fssh")
	f.Fuzz(func(t *testing.T, data string) {
		in := kvsFromFuzz(data, false)
		for _, c := range []struct {
			what   string
			filter func([]KV) ([]KV, []string)
			keyOK  func(string) bool
		}{
			{"FilterGlobal", FilterGlobal, globalKeyRE.MatchString},
			{"FilterRepo", FilterRepo, func(k string) bool { return globalKeyRE.MatchString(k) || repoKeyRE.MatchString(k) }},
		} {
			kept, dropped := c.filter(in)
			rest := kept
			for _, kv := range in {
				if len(rest) > 0 && rest[0] == kv {
					rest = rest[1:]
				} else if !slices.Contains(dropped, redactKey(kv.Key)) {
					t.Fatalf("%s: %q neither kept in order nor dropped", c.what, kv.Key)
				}
			}
			if len(rest) > 0 {
				t.Fatalf("%s: kept %+v not from the input in order", c.what, rest)
			}
			for _, kv := range kept {
				if !c.keyOK(kv.Key) {
					t.Fatalf("%s kept key %q outside the allowlist", c.what, kv.Key)
				}
				if u, err := url.Parse(kv.Value); err == nil && u.User != nil {
					if _, hasPass := u.User.Password(); hasPass || slices.Contains([]string{"http", "https", "ftp", "ftps"}, u.Scheme) {
						t.Fatalf("%s kept %s with credentials in its URL", c.what, kv.Key)
					}
				}
				if passwordRE.MatchString(kv.Value) {
					t.Fatalf("%s kept %s with user:password@ in its value", c.what, kv.Key)
				}
			}
			if _, err := Render(kept); err != nil {
				t.Fatalf("%s kept an entry Render refuses: %v", c.what, err)
			}
			for _, d := range dropped {
				if HasCredentials(d) || strings.ContainsAny(d, "?\n\x00") {
					t.Fatalf("%s reports dropped key %q with credentials", c.what, d)
				}
			}
		}
	})
}

func FuzzForward(f *testing.F) {
	f.Add("PATH=/bin\x1eAWS_REGION=x\x1eGITHUB_TOKEN=t\x1eDUP=1\x1eDUP=2", "AWS_* GITHUB_TOKEN DUP PATH", "")
	f.Add("A=1\x1eAB=2\x1eLD_PRELOAD=x", "*", "A?")
	f.Add("A=1", "{A,B", "")
	f.Fuzz(func(t *testing.T, env, forward, skip string) {
		hostEnv := strings.Split(env, "\x1e")
		fw, sk := ParseList(forward), ParseList(skip)
		out, refused, err := Forward(hostEnv, fw, sk)
		if err != nil {
			if out != nil || refused != nil {
				t.Fatal("results with an error")
			}
			return
		}
		names := map[string]bool{}
		for _, kv := range out {
			name, value, ok := strings.Cut(kv, "=")
			if !ok || !validName(name) || strings.Contains(value, "\x00") || Reserved(name) || names[name] {
				t.Fatalf("forwarded %q", kv)
			}
			names[name] = true
			if !slices.Contains(hostEnv, kv) || !matchAny(fw, name) || matchAny(sk, name) {
				t.Fatalf("forwarded %q not asked for", kv)
			}
		}
		for _, name := range refused {
			if !Reserved(name) {
				t.Fatalf("refused %q, which is not reserved", name)
			}
		}
	})
}
