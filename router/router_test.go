package router

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// row is one routing case. Commands may use @CODE@, @CODE2@, @OUT@, @HOME@.
type row struct {
	name   string
	cmd    string
	where  Where
	reason string   // a substring the reason must contain; "" for any
	cwd    string   // relative to the layout root; "" means "code"
	hosts  []string // host-command entries; nil means DefaultHostCommands
}

func h(name, cmd string) row { return row{name: name, cmd: cmd, where: Host, reason: "host: "} }
func s(name, cmd, reason string) row {
	return row{name: name, cmd: cmd, where: Sandbox, reason: reason}
}
func (r row) in(cwd string) row               { r.cwd = cwd; return r }
func (r row) with(hosts ...string) row        { r.hosts = hosts; return r }
func (r row) because(reason string) row       { r.reason = reason; return r }
func hostReason(name, cmd, reason string) row { return h(name, cmd).because(reason) }

var routeTable = []row{
	// Listed host commands, plain.
	hostReason("push", "git push", "host: git push (listed host command)"),
	h("push remote branch", "git push origin main"),
	hostReason("fetch", "git fetch", "host: git fetch (listed host command)"),
	h("pull", "git pull"),
	h("ls-remote", "git ls-remote origin"),
	h("ls-remote url", "git ls-remote https://example.com/x.git"),
	h("clone with target", "git clone https://example.com/x/repo.git repo"),
	h("clone derived target", "git clone https://example.com/x/repo.git"),
	h("clone scp-like", "git clone -b main --single-branch git@example.com:x/r.git"),
	h("clone ssh url with port", "git clone ssh://git@example.com:2222/x/r.git r2"),
	h("clone into new dir under sub", "git clone https://example.com/r.git sub/new"),
	h("clone into existing empty dir", "git clone https://example.com/r.git existing"),
	h("clone depth", "git clone --depth 1 https://example.com/r.git r"),
	h("clone filter", "git clone --filter=blob:none https://example.com/x.git x"),
	h("clone -C sub", "git -C sub clone https://example.com/r.git r"),
	h("clone -- url", "git clone -- https://example.com/r.git r"),
	h("remote add https", "git remote add upstream https://example.com/x/repo.git"),
	h("remote add -f --tags", "git remote add -f --tags up https://example.com/x.git"),
	h("remote add --mirror=push", "git remote add --mirror=push backup https://example.com/x.git"),
	h("remote set-url scp", "git remote set-url origin git@example.com:x/repo.git"),
	h("remote set-url --push", "git remote set-url --push origin https://example.com/x/y.git"),
	h("remote set-url --delete pattern", `git remote set-url --delete origin 'example\.com'`),

	// Quoting: quote removal gives the same words.
	h("single-quoted program", "'git' push"),
	h("double-quoted words", `"git" "push"`),
	h("split quotes", `git "pu"sh`),
	h("backslash program", `\git push`),
	h("escaped space in refspec", `git push origin a\ b`),
	h("single-quoted dollar is literal", `git push origin '$HOME'`),
	h("escaped dollar in double quotes", `git push origin "\$HOME"`),
	h("quoted glob is literal", `git push origin 'refs/heads/*:refs/heads/*'`),
	h("escaped glob is literal", `git push origin refs/heads/\*`),
	h("extra spaces", "git  push   origin"),
	h("tab separator", "git\tpush\torigin"),
	h("trailing newline", "git push\n"),
	h("empty argument", `git push origin ''`),

	// Options allowed per sub-command.
	h("refspec HEAD:refs/heads/x", "git push origin HEAD:refs/heads/x"),
	h("force-with-lease", "git push --force-with-lease"),
	h("force-with-lease value", "git push --force-with-lease=main:abc123 origin main"),
	h("push option -o", "git push -o ci.skip"),
	h("push option long", "git push --push-option=ci.skip origin main"),
	h("push -u", "git push -u origin feature"),
	h("push bundled -fu", "git push -fu origin main"),
	h("push option after positional", "git push origin main --force"),
	h("push -- positionals", "git push -- origin main"),
	h("push --delete", "git push --delete origin old-branch"),
	h("push delete refspec", "git push origin :old-branch"),
	h("push --tags", "git push --tags"),
	h("push dry-run porcelain", "git push --dry-run --porcelain"),
	h("push recurse-submodules=check", "git push --recurse-submodules=check"),
	h("push url ssh", "git push ssh://git@example.com/x/r.git main"),
	h("push url with credentials", "git push https://user:token@example.com/x.git"),
	h("fetch --all --prune", "git fetch --all --prune"),
	h("fetch refspec", "git fetch upstream main:refs/remotes/upstream/main"),
	h("fetch --multiple", "git fetch --multiple origin upstream"),
	h("fetch -j value", "git fetch -j 4"),
	h("fetch depth=", "git fetch --depth=1 origin main"),
	h("fetch --no-recurse-submodules", "git fetch --no-recurse-submodules"),
	h("fetch --recurse-submodules=no", "git fetch --recurse-submodules=no"),
	h("fetch -u is not allowed but -p is", "git fetch -p"),
	h("pull --rebase", "git pull --rebase"),
	h("pull --rebase=merges", "git pull --rebase=merges"),
	h("pull -r", "git pull -r"),
	h("pull --no-verify", "git pull --no-verify"),
	h("pull --ff-only", "git pull --ff-only origin main"),
	h("pull --rebase remote branch", "git pull --rebase origin main"),
	h("ls-remote --heads", "git ls-remote --heads origin"),

	// Global options.
	h("-C sub", "git -C sub push"),
	h("-C absolute inside", "git -C @CODE@/sub push"),
	h("-C sub fetch", "git -C sub fetch"),
	h("--no-pager", "git --no-pager push"),
	h("-P", "git -P fetch"),

	// Env switches.
	h("GIT_TRACE=1", "GIT_TRACE=1 git push"),
	h("GIT_TERMINAL_PROMPT=0", "GIT_TERMINAL_PROMPT=0 git fetch"),
	h("two switches", "GIT_TRACE=true GIT_TRACE_PACKET=0 git push"),
	h("quoted switch value", `GIT_TRACE="1" git push`),

	// cd.
	h("cd sub", "cd sub && git push"),
	h("cd quoted", "cd 'sub' && git push"),
	h("cd through .. inside", "cd sub/deeper/.. && git push"),
	h("cd .. from sub", "cd .. && git push").in("code/sub"),
	h("cd absolute inside", "cd @CODE@/sub && git push"),
	h("cd sub/../sub/deeper", "cd sub/../sub/deeper && git push"),
	h("cwd in second code dir", "git push").in("code2/x"),

	// Glue: redirections, pipes, echo/printf, && and ||.
	h("2>&1 into filters", "git push 2>&1 | grep -v foo | head -5"),
	h(">/dev/null", "git push >/dev/null"),
	h("2>/dev/null", "git push 2>/dev/null"),
	h("&>/dev/null", "git push &>/dev/null"),
	h(">/dev/null 2>&1", "git push >/dev/null 2>&1"),
	h("2>&1 >/dev/null", "git push 2>&1 >/dev/null"),
	h(">&2", "git push >&2"),
	h("quoted /dev/null", `git push >"/dev/null"`),
	h("|& tail", "git fetch |& tail -n 3"),
	h("&& echo", "git push && echo done"),
	h("|| echo", "git push || echo failed"),
	h("echo &&", "echo pushing && git push"),
	h("printf &&", `printf '%s\n' start && git push`),
	h("printf %d and %%", `printf 'a%%b %d\n' 5 && git push`),
	h("printf reuse", `printf '%s-' a b c && git push`),
	h("echo -n", "echo -n x && git push"),
	h("echo -e without escapes", "echo -e plain && git push"),
	h("echo to /dev/null", "echo x >/dev/null && git push"),
	h("fetch && push", "git fetch && git push"),
	h("cd chain", `cd sub && git fetch && git pull --rebase || echo "pull failed"`),
	h("cut sort uniq", "git ls-remote --heads origin | cut -f2 | sort | uniq -c"),
	h("grep -c", "git ls-remote origin | grep -c refs/tags"),
	h("wc -l", "git ls-remote origin | wc -l"),
	h("tr sets", "git ls-remote origin | tr a-z A-Z"),
	h("sort -k -t", "git ls-remote origin | sort -k 2 -t / | head -n 1"),
	h("jq -R .", "git ls-remote origin | jq -R ."),
	h("jq field named env", "git ls-remote origin | jq -rc '.env'"),
	h("grep -e -e", "git ls-remote origin | grep -e main -e dev"),
	h("tail -5", "git ls-remote origin | tail -5"),
	h("head -1", "git ls-remote origin | head -1"),
	h("grep -- pattern", "git ls-remote origin | grep -- -x"),
	h("cut -d, attached", "git ls-remote origin | cut -d, -f1"),
	h("trace into grep", "GIT_TRACE=1 git push 2>&1 | grep -i error"),

	// Custom host-command lists.
	h("listed gh pr create", "gh pr create --title x").with("gh pr create"),
	h("longer git prefix", "git push origin main").with("git push origin"),

	// Path arguments of listed non-git commands.
	h("gh body file in the code dir", "gh pr create --body-file file.txt").with("gh pr create"),
	h("gh body file absolute inside", "gh pr create --body-file @CODE@/file.txt").with("gh pr create"),
	h("gh body file in the second code dir", "gh pr create --body-file=@CODE2@/x/new.md").with("gh pr create"),
	h("gh body file from a sub dir", "gh pr create --body-file ../file.txt").with("gh pr create").in("code/sub"),
	h("gh title words", "gh pr create --title 'fix: a/b and c=d' --base main -R owner/repo").with("gh pr create"),
	h("gh url argument", "gh pr create --body https://example.com/x").with("gh pr create"),
	h("gh new file lexically inside", "gh pr create --body-file new/../file.txt").with("gh pr create"),
	s("gh body file absolute outside", "gh pr create --body-file /etc/passwd", "outside the code dirs").with("gh pr create"),
	s("gh body file --opt=path", "gh pr create --body-file=/etc/passwd", "outside the code dirs").with("gh pr create"),
	s("gh body file short attached", "gh pr create -F/etc/passwd", "outside the code dirs").with("gh pr create"),
	s("gh body file at-file", "gh pr create -F @/etc/passwd", "outside the code dirs").with("gh pr create"),
	s("gh api field at-file", "gh api -F k=@@OUT@/secret.txt", "outside the code dirs").with("gh api"),
	s("gh body file tilde", "gh pr create --body-file '~/.ssh/id_rsa'", "home directory").with("gh pr create"),
	s("gh body file tilde after =", "gh pr create '--body-file=~/.netrc'", "home directory").with("gh pr create"),
	s("gh body file dotdot", "gh pr create --body-file ../outside/secret.txt", "climbs out").with("gh pr create"),
	s("gh body file dotdot past a new name", "gh pr create --body-file new/../../outside/secret.txt", "climbs out").with("gh pr create"),
	s("gh body file dotdot absolute", "gh pr create --body-file @CODE@/../outside/secret.txt", "outside the code dirs").with("gh pr create"),
	s("gh body file through a symlink", "gh pr create --body-file link/secret.txt", "symlink").with("gh pr create"),
	s("gh body file inner symlink", "gh pr create --body-file sub/uplink/file.txt", "symlink").with("gh pr create"),
	s("gh body file git config", "gh pr create --body-file .git/config", ".git").with("gh pr create"),
	s("gh body file GIT config", "gh pr create --body-file .GIT/config", ".git").with("gh pr create"),
	s("gh body file file url", "gh pr create --body-file file:///etc/passwd", "outside the code dirs").with("gh pr create"),
	s("gh absolute outside after the prefix only", "gh pr create /etc/shadow", "outside").with("gh pr create"),

	// Parse problems and empty input.
	s("empty", "", "empty command"),
	s("blank", "   ", "empty command"),
	s("parse error", "git push 'unterminated", "does not parse"),
	s("too long", "git push "+strings.Repeat("a", maxCommandLen), "too long"),

	// Other programs and sub-commands.
	s("git commit", "git commit -m x", `"git commit" is not a listed host command`),
	s("git status", "git status", "not a listed host command"),
	s("bare git", "git", "not a listed host command"),
	s("gh not listed by default", "gh pr create", `"gh" is not a listed host command`),
	s("gh pr list with gh pr create listed", "gh pr list", "not a listed").with("gh pr create"),
	s("gh alone with gh pr create listed", "gh", "not a listed").with("gh pr create"),
	s("git fetch with only push listed", "git fetch", "not a listed").with("git push"),
	s("longer prefix not matched", "git push upstream main", "not a listed").with("git push origin"),
	s("rm", "rm -rf /", `"rm" is not a listed host command`),
	s("make", "make test", "not a listed"),
	s("echo alone", "echo hi", "no listed host command"),
	s("cd and echo", "cd sub && echo hi", "no listed host command"),
	s("alias", "alias git=x", "not a listed"),
	s("path-qualified ./git", "./git push", "path-qualified"),
	s("path-qualified /usr/bin/git", "/usr/bin/git push", "path-qualified"),
	s("command git", "command git push", `"command" is not a listed`),
	s("exec git", "exec git push", "not a listed"),
	s("nohup git", "nohup git push", "not a listed"),
	s("env git", "env git push", "not a listed"),
	s("sudo git", "sudo git push", "not a listed"),
	s("builtin cd", "builtin cd sub && git push", "not a listed"),
	s("time git", "time git push", "time is never run"),

	// Unicode and control characters.
	s("zero-width space", "g\u200bit push", "non-ASCII"),
	s("full-width git", "ｇｉｔ push", "non-ASCII"),
	s("NBSP separator", "git\u00a0push", "non-ASCII"),
	s("ideographic space", "git\u3000push", "non-ASCII"),
	s("NBSP before argument", "git push\u00a0origin", "non-ASCII"),
	s("carriage return", "git push\r", "control"),
	s("NUL", "git push\x00", "control"),

	// Separators.
	s("newline", "git push\nrm -rf /", "newline"),
	s("backslash-newline", "git pu\\\nsh", "newline"),
	s("semicolon", "git push; rm -rf /", "';'"),
	s("trailing semicolon", "git push;", "';'"),
	s("background", "git push & rm x", "'&'"),
	s("background alone", "git push &", "background"),
	s("comment", "git push # note", "comments"),
	s("negation", "! git push", "negation"),
	s("&& rm", "git push && rm -rf /", "not a listed"),
	s("|| rm", "git push || rm -rf /", "not a listed"),

	// Expansions.
	s("command substitution", "git push $(echo origin)", "command substitution is never run on the host"),
	s("backticks", "git push `x`", "command substitution"),
	s("command substitution in dq", `git push "$(x)"`, "command substitution"),
	s("command substitution in echo", "echo $(rm -rf /) && git push", "command substitution"),
	s("process substitution", "git push <(x)", "process substitution"),
	s("$VAR", "git push $HOME", "parameter expansion"),
	s("${VAR}", "git push ${HOME}", "parameter expansion"),
	s("$VAR in dq", `git push "$HOME"`, "parameter expansion"),
	s("$VAR in program", "$GIT push", "parameter expansion"),
	s("$VAR in env value", "GIT_TRACE=$X git push", "parameter expansion"),
	s("arithmetic", "git push origin $((1+1))", "arithmetic"),
	s("ANSI-C quote", `git push $'\x2d-exec=x'`, "ANSI-C"),
	s("locale quote", `git push $"origin"`, "locale"),
	s("tilde", "git push ~", "tilde"),
	s("tilde path", "git push ~/x", "tilde"),
	s("tilde after =", "git push origin a=~", "tilde"),
	s("unquoted glob", "git push origin refs/heads/*", "glob"),
	s("question glob", "git push origin ma?n", "glob"),
	s("bracket glob", "git push origin [ab]", "glob"),
	s("extglob", "git push origin @(a|b)", "glob"),
	s("brace expansion", "git push origin {a,b}", "brace"),
	s("trailing backslash", `git push origin\`, "backslash"),

	// Compound commands.
	s("subshell", "(git push)", "subshells"),
	s("group", "{ git push; }", "groups"),
	s("if", "if true; then git push; fi", "control flow"),
	s("for", "for i in 1; do git push; done", "control flow"),
	s("while", "while git push; do :; done", "control flow"),
	s("function", "f() { git push; }", "function"),
	s("test clause", "[[ -d x ]] && git push", "test clauses"),
	s("arithmetic command", "((1)) && git push", "arithmetic"),
	s("let", "let x=1 && git push", "arithmetic"),
	s("declare", "declare x=1 && git push", "declare"),
	s("export", "export X=1 && git push", "declare"),
	s("coproc", "coproc git push", "coproc"),
	s("assignment alone", "GIT_TRACE=1", "without a command"),

	// Redirections.
	s("heredoc", "git push <<EOF", ""),
	s("here-string", "git push <<< x", "here-string"),
	s("> file", "git push >file", "redirection"),
	s("2> file", "git push 2>file", "redirection"),
	s(">> /dev/null", "git push >>/dev/null", "redirection"),
	s("< /dev/null", "git push </dev/null", "redirection"),
	s("<> /dev/null", "git push <>/dev/null", "redirection"),
	s("fd 3", "git push 3>/dev/null", "fd"),
	s("close fd", "git push 2>&-", "redirection"),
	s("dup to fd 3", "git push >&3", "redirection"),
	s("clobber", "git push >| /dev/null", "redirection"),
	s("&> file", "git push &>out.txt", "redirection"),
	s("redirected filter", "git push | grep -v x > out", "redirection"),
	s("redirection only", ">/dev/null", ""),

	// Pipes and filters.
	s("tee", "git push | tee f", `"tee" is not a listed`),
	s("grep -f", "git push | grep -f /etc/passwd x", `grep option "-f"`),
	s("grep -r", "git push | grep -r x", `grep option "-r"`),
	s("grep file operand", "git push | grep x file.txt", "file operand"),
	s("grep long option", "git push | grep --include=x y", "long option"),
	s("grep without pattern", "git push | grep -x", "needs a pattern"),
	s("grep -A bad value", "git push | grep -A 1x y", "value"),
	s("grep - operand", "git push | grep x -", "file operand"),
	s("sort -o", "git push | sort -o f", `sort option "-o"`),
	s("sort -T", "git push | sort -T /tmp", `sort option "-T"`),
	s("sort -S", "git push | sort -S 1G", `sort option "-S"`),
	s("uniq IN OUT", "git push | uniq in out", "file operand"),
	s("jq -n env", "git push | jq -n env", "environment"),
	s("jq $ENV", "git push | jq '$ENV.HOME'", "environment"),
	s("jq env in string interpolation", `git push | jq '"\(env.HOME)"'`, "environment"),
	s("jq import", `git push | jq 'import "a" as $a; .'`, "environment or files"),
	s("jq include", `git push | jq 'include "a"; .'`, "environment or files"),
	s("jq --rawfile", "git push | jq --rawfile x /etc/passwd .", "long option"),
	s("jq -f", "git push | jq -f prog.jq", `jq option "-f"`),
	s("jq -L", "git push | jq -L /tmp .", `jq option "-L"`),
	s("jq --arg", "git push | jq --arg x y .", "long option"),
	s("jq file operand", "git push | jq . file.json", "file operand"),
	s("jq --", "git push | jq -- .", `"--"`),
	s("head file", "git push | head -n 1 file.txt", "file operand"),
	s("head -5 with more", "git push | head -5 -q", "option"),
	s("tail -f", "git push | tail -f", `tail option "-f"`),
	s("cut file", "git push | cut -f1 file.txt", "file operand"),
	s("cut extra operand", "git push | cut -d, -f1 extra", "file operand"),
	s("wc file", "git push | wc -l file.txt", "file operand"),
	s("wc --files0-from", "git push | wc --files0-from=x", "long option"),
	s("tr no sets", "git push | tr -d", "sets"),
	s("xargs", "git push | xargs rm", "not a listed"),
	s("pipe to sh", "git push | head -n 1 | sh", "not a listed"),
	s("filter first", "grep x | git push", "must read a pipe"),
	s("filter alone", "grep x", "must read a pipe"),
	s("host command after pipe", "echo x | git push", "must start its pipeline"),
	s("git into git", "git ls-remote | git push", "must start its pipeline"),
	s("echo after pipe", "git push | echo x", "must start its pipeline"),

	// echo and printf subsets.
	s("printf -v", "printf -v x y && git push", "options"),
	s("printf %b", "printf '%b' x && git push", "directive"),
	s("printf width", "printf '%5s' x && git push", "directive"),
	s("printf hex escape", `printf '\x41' && git push`, "escape"),
	s("printf octal arg", "printf '%d' 010 && git push", "decimal"),
	s("printf no format", "printf && git push", "format"),
	s("echo -e escapes", `echo -e 'a\nb' && git push`, "echo -e"),
	s("env prefix on echo", "GIT_TRACE=1 echo x && git push", "env prefixes"),

	// Env prefixes.
	s("GIT_SSH_COMMAND", "GIT_SSH_COMMAND=x git push", "GIT_SSH_COMMAND"),
	s("GIT_TRACE path", "GIT_TRACE=/tmp/x git push", "not an on/off switch"),
	s("GIT_TRACE fd", "GIT_TRACE=5 git push", "not an on/off switch"),
	s("GIT_TRACE_REDACT", "GIT_TRACE_REDACT=0 git push", "GIT_TRACE_REDACT"),
	s("FOO", "FOO=1 git push", "FOO"),
	s("GIT_DIR", "GIT_DIR=x git push", "GIT_DIR"),
	s("append assign", "GIT_TRACE+=1 git push", "switches"),
	s("empty value", "GIT_TRACE= git push", "switch"),

	// cd and paths.
	s("cd outside", "cd /tmp && git push", "outside the code dirs"),
	s("cd .. from root", "cd .. && git push", "leaves the code dir"),
	s("cd sub/../..", "cd sub/../.. && git push", "leaves the code dir"),
	s("cd symlink out", "cd link && git push", "symlink"),
	s("cd symlink in", "cd inlink && git push", "symlink"),
	s("cd symlink up", "cd sub/uplink && git push", "symlink"),
	s("cd file", "cd file.txt && git push", "not a directory"),
	s("cd missing", "cd missing && git push", "not an existing directory"),
	s("cd -", "cd - && git push", "cd options"),
	s("cd -P", "cd -P sub && git push", "cd options"),
	s("cd no args", "cd && git push", "exactly one"),
	s("cd two args", "cd sub deeper && git push", "exactly one"),
	s("cd ~", "cd ~ && git push", "tilde"),
	s("cd $HOME", "cd $HOME && git push", "parameter expansion"),
	s("cd ||", "cd sub || git push", "leading"),
	s("cd not leading", "git push && cd sub && git push", "leading"),
	s("cd twice", "cd sub && cd deeper && git push", "leading"),
	s("cd .git", "cd .git && git push", ".git"),
	s("cd .GIT", "cd .GIT && git push", ".git"),
	s("cd nested repo", "cd nested && git push", "own .git"),
	s("cd absolute with ..", "cd @CODE@/sub/.. && git push", `".."`),
	s("cd into other code dir via ..", "cd ../code2 && git push", "leaves the code dir"),
	s("cwd outside", "git push", "outside the code dirs").in("outside"),
	s("cwd through symlink", "git push", "symlink").in("code/inlink"),
	s("cwd in .git", "git push", ".git").in("code/.git"),

	// git global options.
	s("-C outside", "git -C /etc push", "outside the code dirs"),
	s("-C ..", "git -C .. push", "leaves the code dir"),
	s("-C symlink", "git -C link push", "symlink"),
	s("-C nested", "git -C nested push", "own .git"),
	s("-Csub attached", "git -Csub push", `"-Csub"`),
	s("-C twice", "git -C sub -C deeper push", "only once"),
	s("-C missing value", "git -C", "needs a directory"),
	s("--git-dir", "git --git-dir=.git push", `"--git-dir"`),
	s("--work-tree", "git --work-tree=. push", `"--work-tree"`),
	s("-c config", "git -c core.sshCommand=x push", `"-c"`),
	s("--config-env", "git --config-env=core.sshCommand=X push", `"--config-env"`),
	s("--exec-path", "git --exec-path=/tmp push", `"--exec-path"`),
	s("-p paginate", "git -p push", `"-p"`),
	s("--paginate", "git --paginate push", `"--paginate"`),
	s("--namespace", "git --namespace=x push", `"--namespace"`),
	s("--bare", "git --bare push", `"--bare"`),

	// git push options.
	s("push --receive-pack=", "git push --receive-pack=x", `"--receive-pack"`),
	s("push --receive-pack sep", "git push --receive-pack x origin", `"--receive-pack"`),
	s("push --rec= prefix", "git push --rec=x", `"--rec"`),
	s("push --exec=", "git push --exec=x", `"--exec"`),
	s("push --exe= prefix", "git push --exe=x", `"--exe"`),
	s("push --repo", "git push --repo=x", `"--repo"`),
	s("push --signed", "git push --signed", `"--signed"`),
	s("push recurse on-demand", "git push --recurse-submodules=on-demand", "value"),
	s("push bundled unknown", "git push -qfux", `"-x"`),
	s("push flag with value", "git push --force=x", "takes no value"),
	s("push -o missing value", "git push -o", "needs a value"),

	// git fetch / pull / ls-remote options.
	s("fetch --upload-pack=", "git fetch --upload-pack=x", `"--upload-pack"`),
	s("fetch --upload-pack sep", "git fetch --upload-pack x origin", `"--upload-pack"`),
	s("fetch --upl= prefix", "git fetch --upl=x", `"--upl"`),
	s("fetch -u", "git fetch -u x", `"-u"`),
	s("fetch --recurse-submodules", "git fetch --recurse-submodules", "value"),
	s("fetch --stdin", "git fetch --stdin", `"--stdin"`),
	s("fetch depth not a number", "git fetch --depth=abc", "value"),
	s("fetch -j without value", "git fetch -Pj", "needs a value"),
	s("pull --upload-pack", "git pull --upload-pack=x", `"--upload-pack"`),
	s("pull -s", "git pull -s ours", `"-s"`),
	s("pull --strategy", "git pull --strategy=x", `"--strategy"`),
	s("pull -X", "git pull -X theirs", `"-X"`),
	s("pull -S", "git pull -S", `"-S"`),
	s("pull --gpg-sign", "git pull --gpg-sign", `"--gpg-sign"`),
	s("pull --edit", "git pull --edit", `"--edit"`),
	s("pull -e", "git pull -e", `"-e"`),
	s("pull --rebase=interactive", "git pull --rebase=interactive", "value"),
	s("pull -ri", "git pull -ri", "value"),
	s("pull --verify-signatures", "git pull --verify-signatures", `"--verify-signatures"`),
	s("ls-remote --upload-pack", "git ls-remote --upload-pack=x origin", `"--upload-pack"`),
	s("ls-remote --exec", "git ls-remote --exec=x origin", `"--exec"`),
	s("ls-remote --get-url", "git ls-remote --get-url origin", `"--get-url"`),

	// git clone options and paths.
	s("clone -u", "git clone -u x https://example.com/r.git r", `"-u"`),
	s("clone -uPROG", "git clone -ux https://example.com/r.git r", `"-u"`),
	s("clone -qux bundle", "git clone -qux https://example.com/r.git r", `"-u"`),
	s("clone --upload-pack", "git clone --upload-pack=x https://example.com/r.git r", `"--upload-pack"`),
	s("clone --upl= prefix", "git clone --upl=x https://example.com/r.git r", `"--upl"`),
	s("clone --template", "git clone --template=x https://example.com/r.git r", `"--template"`),
	s("clone --templ= prefix", "git clone --templ=x https://example.com/r.git r", `"--templ"`),
	s("clone --config", "git clone --config core.sshCommand=x https://example.com/r.git r", `"--config"`),
	s("clone -c", "git clone -c core.sshCommand=x https://example.com/r.git r", `"-c"`),
	s("clone --separate-git-dir", "git clone --separate-git-dir=x https://example.com/r.git r", `"--separate-git-dir"`),
	s("clone --reference outside", "git clone --reference /outside https://example.com/r.git r", `"--reference"`),
	s("clone --reference-if-able", "git clone --reference-if-able=x https://example.com/r.git r", `"--reference-if-able"`),
	s("clone --recurse-submodules", "git clone --recurse-submodules https://example.com/r.git r", `"--recurse-submodules"`),
	s("clone --recursive", "git clone --recursive https://example.com/r.git r", `"--recursive"`),
	s("clone --bundle-uri", "git clone --bundle-uri=x https://example.com/r.git r", `"--bundle-uri"`),
	s("clone --bare", "git clone --bare https://example.com/r.git r", `"--bare"`),
	s("clone --mirror", "git clone --mirror https://example.com/r.git r", `"--mirror"`),
	s("clone --local", "git clone -l https://example.com/r.git r", `"-l"`),
	s("clone --shared", "git clone -s https://example.com/r.git r", `"-s"`),
	s("clone -o value", "git clone -oProxyCommand=x host:repo", "value"),
	s("clone target outside", "git clone https://example.com/r.git /tmp/repo", "outside the code dirs"),
	s("clone target ..", "git clone https://example.com/r.git ../repo", "leaves the code dir"),
	s("clone target through symlink", "git clone https://example.com/r.git link/x", "symlink"),
	s("clone target in .git", "git clone https://example.com/r.git .git/x", ".git"),
	s("clone target is a file", "git clone https://example.com/r.git file.txt", "not a directory"),
	s("clone target missing parent", "git clone https://example.com/r.git sub/new/deeper", "not an existing directory"),
	s("clone underivable target", "git clone 'https://example.com/r?x=1'", "explicit directory"),
	s("clone too many", "git clone https://example.com/r.git a b", "at most"),
	s("clone file://", "git clone file:///etc/x y", "local"),
	s("clone absolute path", "git clone @OUT@ y", "local"),
	s("clone local bare", "git clone ./bare.git y", "local"),
	s("clone bare name", "git clone bare.git y", "local"),
	s("clone -- -oProxyCommand", "git clone -- -oProxyCommand=x host:repo", "looks like an option"),
	s("clone ssh -oProxyCommand", "git clone ssh://-oProxyCommand=x/ d", "option"),
	s("clone ext::", "git clone 'ext::sh -c touch% /tmp/pwned' d", "transport helper"),

	// Remote URLs and local repositories.
	s("push ext::sh", "git push ext::sh", "transport helper"),
	s("push ext:: quoted", "git push 'ext::sh -c touch% /tmp/pwned'", "transport helper"),
	s("push fd::", "git push fd::3", "transport helper"),
	s("push helper::", "git push foo::bar", "transport helper"),
	s("push ssh -oProxyCommand", "git push 'ssh://-oProxyCommand=x/x'", "option"),
	s("push ssh user -o", "git push 'ssh://-oProxyCommand=x@host/x'", "option"),
	s("push scp host -", "git push 'user@-oProxy:repo'", "option"),
	s("push -- -oProxyCommand", "git push -- -oProxyCommand=x:repo", "looks like an option"),
	s("push percent in host", "git push 'ssh://%2doProxy/x'", "host"),
	s("push unknown scheme", "git push svn://x/y", "git-remote-svn"),
	s("push upper-case scheme", "git push HTTPS://x/y", "scheme"),
	s("push file://", "git push file:///tmp/x", "local"),
	s("push absolute path", "git push /tmp/x", "local"),
	s("push relative path", "git push ../x", "local"),
	s("push ./bare.git", "git push ./bare.git", "local"),
	s("push bare.git name", "git push bare.git", "local"),
	s("push name with .git dir", "git push bare", "local"),
	s("push name of a dir", "git push origin2", "local"),
	s("push .", "git push . HEAD:x", "local"),
	s("fetch local", "git fetch @CODE@/bare.git", "local"),
	s("pull .", "git pull . main", "local"),
	s("fetch --multiple local", "git fetch --multiple origin ./bare.git", "local"),
	s("remote add ext", "git remote add x ext::sh", "transport helper"),
	s("remote add local", "git remote add x /tmp/repo", "local"),
	s("remote add bare", "git remote add x ./bare.git", "local"),
	s("remote add option name", "git remote add -- -x https://example.com/x.git", "looks like an option"),
	s("remote add odd name", "git remote add 'a b' https://example.com/x.git", "plain name"),
	s("remote add one arg", "git remote add x", "name and a URL"),
	s("remote set-url ext", "git remote set-url origin ext::x", "transport helper"),
	s("remote -v add", "git remote -v add x https://example.com/x.git", `"git remote" is not a listed`),
	s("remote remove", "git remote remove origin", "not a listed"),
}

func TestRouteTable(t *testing.T) {
	if len(routeTable) < 150 {
		t.Fatalf("the table has %d rows; it must keep at least 150", len(routeTable))
	}
	l := newLayout(t)
	names := map[string]bool{}
	for _, r := range routeTable {
		if names[r.name] {
			t.Errorf("duplicate row name %q", r.name)
		}
		names[r.name] = true
		t.Run(r.name, func(t *testing.T) {
			d, w := l.decideRow(t, r)
			if d.Where != r.where || !strings.Contains(d.Reason, r.reason) {
				t.Fatalf("Decide(%q) = %s %q; want %s with reason containing %q", r.cmd, d.Where, d.Reason, r.where, r.reason)
			}
			if len(w.unhandled) > 0 {
				t.Fatalf("node types reached the default of check: %v", w.unhandled)
			}
			if (d.Where == Host) != (d.Plan != nil) {
				t.Fatalf("where=%s but plan=%v", d.Where, d.Plan)
			}
			if d.Where == Host {
				checkPlanInvariants(t, l, d.Plan)
			}
		})
	}
}

func (l *layout) decideRow(tb testing.TB, r row) (Decision, *walker) {
	tb.Helper()
	prefixes := defaultPrefixes(tb)
	if r.hosts != nil {
		var err error
		if prefixes, err = ParsePrefixes(r.hosts); err != nil {
			tb.Fatal(err)
		}
	}
	cwd := l.code
	if r.cwd != "" {
		cwd = l.root + "/" + r.cwd
	}
	return decide(l.expand(r.cmd), cwd, l.codeDirs(), prefixes)
}

// checkPlanInvariants checks what every host plan promises the runner.
func checkPlanInvariants(t *testing.T, l *layout, p *Plan) {
	t.Helper()
	inside := func(dir string) bool {
		for _, c := range l.codeDirs() {
			if dir == c || strings.HasPrefix(dir, c+"/") {
				return true
			}
		}
		return false
	}
	if !inside(p.Dir) {
		t.Errorf("plan dir %q is outside the code dirs", p.Dir)
	}
	hosts := 0
	for i, st := range p.Steps {
		if (i == 0) != (st.Op == "") || (i > 0 && st.Op != "&&" && st.Op != "||") {
			t.Errorf("step %d has op %q", i, st.Op)
		}
		for j, c := range st.Pipeline {
			if !inside(c.Dir) {
				t.Errorf("command dir %q is outside the code dirs", c.Dir)
			}
			switch c.Kind {
			case KindHost:
				hosts++
				if j != 0 || len(c.Args) == 0 || c.Prefix == "" {
					t.Errorf("bad host command %+v", c)
				}
				if c.Args[0] == "git" && !c.RepoCheck && c.CreatesDir == "" {
					t.Errorf("git command without repo check or clone target: %+v", c)
				}
				for _, e := range c.Env {
					if !IsEnvSwitch(e) {
						t.Errorf("env %q is not a switch", e)
					}
				}
			case KindFilter:
				if j == 0 || !filterNames[c.Args[0]] {
					t.Errorf("bad filter %+v", c)
				}
			case KindBuiltin:
				if j != 0 || c.Args != nil {
					t.Errorf("bad builtin %+v", c)
				}
			default:
				t.Errorf("unknown kind %q", c.Kind)
			}
		}
	}
	if hosts == 0 {
		t.Error("host plan without a host command")
	}
}

// TestEveryNodeTypeHandled parses a file with every construct the parser
// knows and checks that no node type reaches the default of check: each has
// its own rule and reason.
func TestEveryNodeTypeHandled(t *testing.T) {
	src := `
d=(x y); c[0]=3; a=1 b+=2 git push "$x" '$y' $'z' $"w" ${x:-y} $((1+2)) $(cmd) ` + "`cmd`" + ` <(p) >(q) @(a|b) {a,b} > f 2>&1 <<< s # comment
(sub); { grp; }; if a; then b; elif c; then d; else e; fi; while a; do b; done; until a; do b; done
for i in 1 2; do x; done; for ((i=0; i<1; i++)); do x; done; select s in a; do x; done
case x in a) y;; esac; f() { x; }; function g { y; }; ((x++)); [[ -n x && ( a == b ) ]]; declare -x v=1
let x=1; time a | b; coproc c; ! n; a && b || c; a |& b; bg &
cat <<EOF
body $x
EOF
`
	f, err := syntax.NewParser(syntax.KeepComments(true)).Parse(strings.NewReader(src), "")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil {
			return true
		}
		w := &walker{}
		// Only node types that check itself may visit are relevant: those
		// the parser places where a command, a word part, a redirect or an
		// assignment goes.
		switch n.(type) {
		case *syntax.CaseItem, *syntax.WordIter, *syntax.CStyleLoop,
			*syntax.ArrayExpr, *syntax.ArrayElem, *syntax.BinaryArithm, *syntax.UnaryArithm,
			*syntax.ParenArithm, *syntax.BinaryTest, *syntax.UnaryTest, *syntax.ParenTest:
			return true
		}
		w.check(n)
		if len(w.unhandled) > 0 {
			t.Errorf("node type %v reaches the default of check", w.unhandled)
		}
		seen[reflect.TypeOf(n).String()] = true
		return true
	})
	for _, typ := range []string{"*syntax.CmdSubst", "*syntax.ProcSubst", "*syntax.Subshell", "*syntax.CoprocClause", "*syntax.TimeClause", "*syntax.TestClause"} {
		if !seen[typ] {
			t.Errorf("the construct file has no %s", typ)
		}
	}
}

func TestDecisionJSON(t *testing.T) {
	l := newLayout(t)
	d := Decide("git push", l.code, l.codeDirs(), defaultPrefixes(t))
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"where":"host","reason":"host: git push (listed host command)"}`; got != want {
		t.Fatalf("JSON = %s; want %s", got, want)
	}
}

func TestPlanShapes(t *testing.T) {
	l := newLayout(t)
	p := defaultPrefixes(t)
	for _, tc := range []struct {
		cmd  string
		want Plan
	}{
		{"git -C sub --no-pager push origin", Plan{Dir: l.code, Steps: []Step{{Pipeline: []Cmd{{
			Kind: KindHost, Words: []string{"git", "-C", "sub", "--no-pager", "push", "origin"},
			Args: []string{"git", "--no-pager", "push", "origin"}, Dir: l.code + "/sub",
			Stdout: StreamStdout, Stderr: StreamStderr, Prefix: "git push", RepoCheck: true,
		}}}}}},
		{"cd sub && GIT_TRACE=1 git clone https://example.com/r.git 2>&1 >/dev/null || echo -n 'no luck'", Plan{
			Dir: l.code + "/sub", Steps: []Step{
				{Pipeline: []Cmd{{
					Kind: KindHost, Words: []string{"git", "clone", "https://example.com/r.git"},
					Args: []string{"git", "clone", "https://example.com/r.git", "r"}, Dir: l.code + "/sub",
					Env: []string{"GIT_TRACE=1"}, Stdout: StreamNull, Stderr: StreamStdout,
					Prefix: "git clone", CreatesDir: l.code + "/sub/r",
				}}},
				{Op: "||", Pipeline: []Cmd{{
					Kind: KindBuiltin, Words: []string{"echo", "-n", "no luck"}, Dir: l.code + "/sub",
					Output: "no luck", Stdout: StreamStdout, Stderr: StreamStderr,
				}}},
			}}},
		{"git fetch |& grep -v x >&2", Plan{Dir: l.code, Steps: []Step{{Pipeline: []Cmd{
			{Kind: KindHost, Words: []string{"git", "fetch"}, Args: []string{"git", "fetch"}, Dir: l.code,
				Stdout: StreamStdout, Stderr: StreamStdout, Prefix: "git fetch", RepoCheck: true},
			{Kind: KindFilter, Words: []string{"grep", "-v", "x"}, Args: []string{"grep", "-v", "x"}, Dir: l.code,
				Stdout: StreamStderr, Stderr: StreamStderr},
		}}}}},
	} {
		d := Decide(tc.cmd, l.code, l.codeDirs(), p)
		if d.Plan == nil {
			t.Errorf("Decide(%q) = %s", tc.cmd, d.Reason)
			continue
		}
		if !reflect.DeepEqual(*d.Plan, tc.want) {
			got, _ := json.MarshalIndent(d.Plan, "", " ")
			want, _ := json.MarshalIndent(tc.want, "", " ")
			t.Errorf("Decide(%q) plan:\n%s\nwant:\n%s", tc.cmd, got, want)
		}
	}
}

func TestRenderBuiltins(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"echo", []string{"a", "b"}, "a b\n"},
		{"echo", []string{"-n", "a"}, "a"},
		{"echo", []string{"-ne", "a"}, "a"},
		{"echo", []string{"--", "a"}, "-- a\n"},
		{"echo", []string{"-nx", "a"}, "-nx a\n"},
		{"echo", []string{"-"}, "-\n"},
		{"echo", nil, "\n"},
		{"printf", []string{`%s=%d\n`, "a", "1", "b"}, "a=1\nb=0\n"},
		{"printf", []string{`100%%\t%s`}, "100%\t"},
		{"printf", []string{"x", "ignored"}, "x"},
		{"printf", []string{"%d", "-12"}, "-12"},
		{"printf", []string{`\\`}, `\`},
	} {
		got, r := render(tc.name, tc.args)
		if r != nil || got != tc.want {
			t.Errorf("render(%s %q) = %q, %v; want %q", tc.name, tc.args, got, r, tc.want)
		}
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes([]string{"git push", " gh  pr create ", "git push"})
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{"git", "push"}, {"gh", "pr", "create"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q; want %q", got, want)
	}
	if got, err := ParsePrefixes(nil); err != nil || got != nil {
		t.Fatalf("ParsePrefixes(nil) = %q, %v", got, err)
	}
	for _, bad := range []string{"", "  ", "git", "git commit", "git remote", "/usr/bin/git push", "git -c", "bash -c",
		"env git", "cd", "echo hi", "g\u200bit push", "git push;", "git $x", "-x", "sudo git push"} {
		if _, err := ParsePrefixes([]string{"git push", bad}); err == nil {
			t.Errorf("ParsePrefixes accepted %q", bad)
		} else if !strings.HasPrefix(err.Error(), "router: host command") {
			t.Errorf("error %q lacks the package prefix", err)
		}
	}
}

func TestRelativeCwdAndNoPrefixes(t *testing.T) {
	l := newLayout(t)
	if d := Decide("git push", "code", l.codeDirs(), defaultPrefixes(t)); d.Where != Sandbox || !strings.Contains(d.Reason, "not an absolute path") {
		t.Errorf("relative cwd: %+v", d)
	}
	if d := Decide("git push", l.code, l.codeDirs(), nil); d.Where != Sandbox {
		t.Errorf("no host commands: %+v", d)
	}
	if d := Decide("git push", l.code, []string{"relative", "/"}, defaultPrefixes(t)); d.Where != Sandbox {
		t.Errorf("only relative and / code dirs: %+v", d)
	}
	if d := Decide("git push", l.code, l.codeDirs(), [][]string{{"git"}, {""}, nil}); d.Where != Sandbox {
		t.Errorf("malformed prefixes: %+v", d)
	}
}
