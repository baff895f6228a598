package router

import (
	"fmt"
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Where says where a command runs.
type Where string

const (
	Host    Where = "host"
	Sandbox Where = "sandbox"
)

// Decision is the router's answer for one command. Reason is one short line
// starting with "host: " or "sandbox: "; its wording is stable for a given rule.
// Plan is set only for Host.
type Decision struct {
	Where  Where  `json:"where"`
	Reason string `json:"reason"`
	Plan   *Plan  `json:"-"`
	// KeepsDir says that the command, run by bash, cannot change the
	// shell's own working directory (keepsDir): the sandbox need not
	// report where it ended. False whenever that is not certain, and for
	// text that does not parse or that checkText refuses.
	KeepsDir bool `json:"-"`
}

// Plan is what the host runner executes for a Host decision. No shell ever runs
// it: every command is an argument vector after quote removal.
type Plan struct {
	// Dir is the absolute working directory: the cwd, or the target of the one
	// leading "cd DIR &&".
	Dir string `json:"dir"`
	// Steps run in order with the shell's && / || rules: a step whose Op is "&&"
	// runs only if the last status was 0, "||" only if it was not.
	Steps []Step `json:"steps"`
}

// Step is one pipeline of a Plan. Its status is the status of its last command.
type Step struct {
	Op       string `json:"op,omitempty"` // "&&" or "||"; empty for the first step
	Pipeline []Cmd  `json:"pipeline"`
}

// Kind says how the runner executes a Cmd.
type Kind string

const (
	// KindHost is a listed host command, run from Args.
	KindHost Kind = "host"
	// KindFilter is a text filter (grep, jq, ...) reading the pipe, run from Args.
	KindFilter Kind = "filter"
	// KindBuiltin is echo or printf: the runner writes Output and runs nothing.
	KindBuiltin Kind = "builtin"
)

// Stream names where a file descriptor of a command goes.
type Stream string

const (
	// StreamStdout is the command's own standard output: the pipe to the next
	// command, or the plan's stdout for the last command of a pipeline.
	StreamStdout Stream = "stdout"
	// StreamStderr is the plan's stderr.
	StreamStderr Stream = "stderr"
	// StreamNull discards the output (">/dev/null").
	StreamNull Stream = "null"
)

// Cmd is one command of a pipeline.
type Cmd struct {
	Kind Kind `json:"kind"`
	// Words are the command's words after quote removal, exactly as a shell
	// would pass them.
	Words []string `json:"words"`
	// Args is the argument vector to execute (KindHost, KindFilter). It differs
	// from Words only for git: a global "-C DIR" is turned into Dir, and a
	// "git clone URL" without a directory gets the directory it would create.
	Args []string `json:"args,omitempty"`
	// Dir is the absolute directory the command runs in.
	Dir string `json:"dir"`
	// Env holds NAME=VALUE on/off switches from the env prefix (git only).
	Env []string `json:"env,omitempty"`
	// Output is what a KindBuiltin command writes to its Stdout.
	Output string `json:"output,omitempty"`
	// Stdout and Stderr say where the command's fd 1 and fd 2 go.
	Stdout Stream `json:"stdout"`
	Stderr Stream `json:"stderr"`
	// Prefix is the listed host command this command matched, e.g. "git push".
	Prefix string `json:"prefix,omitempty"`
	// RepoCheck asks the runner to check that Dir belongs to the code dir's
	// own git repository before running (every host git command but clone).
	RepoCheck bool `json:"repo_check,omitempty"`
	// CreatesDir is the absolute directory "git clone" creates; its parent is
	// inside a code dir and no part of it is a symlink.
	CreatesDir string `json:"creates_dir,omitempty"`
}

// maxCommandLen bounds the text the router is willing to check.
const maxCommandLen = 16 << 10

// Decide routes command, run from the absolute directory cwd, given the code
// dirs (absolute paths; others are ignored) and the host-command prefixes (as
// returned by ParsePrefixes; nil means nothing runs on the host).
func Decide(command, cwd string, codeDirs []string, hostCommands [][]string) Decision {
	d, _ := decide(command, cwd, codeDirs, hostCommands)
	return d
}

// refusal is a reason to run in the sandbox.
type refusal struct{ reason string }

func refuse(format string, args ...any) *refusal {
	return &refusal{reason: "sandbox: " + fmt.Sprintf(format, args...)}
}

// walker holds one decision's state.
type walker struct {
	cwd      string
	codeDirs []string
	prefixes [][]string
	// unhandled lists node types that reached the default of check; tests
	// require it to stay empty.
	unhandled []string
	// matched lists the host-command prefixes matched, in order.
	matched []string
}

func decide(command, cwd string, codeDirs []string, hostCommands [][]string) (Decision, *walker) {
	w := &walker{cwd: cwd, prefixes: validPrefixes(hostCommands)}
	for _, d := range codeDirs {
		if d = path.Clean(d); strings.HasPrefix(d, "/") && d != "/" {
			w.codeDirs = append(w.codeDirs, d)
		}
	}
	sandbox := func(r *refusal) Decision { return Decision{Where: Sandbox, Reason: r.reason} }
	src, r := checkText(command)
	if r != nil {
		return sandbox(r), w
	}
	f, err := syntax.NewParser(syntax.KeepComments(true), syntax.Variant(syntax.LangBash)).
		Parse(strings.NewReader(src), "")
	if err != nil {
		return sandbox(refuse("the command does not parse as shell")), w
	}
	keeps := keepsDir(f)
	if r := w.check(f); r != nil {
		d := sandbox(r)
		d.KeepsDir = keeps
		return d, w
	}
	p, r := w.plan(f)
	if r != nil {
		d := sandbox(r)
		d.KeepsDir = keeps
		return d, w
	}
	return Decision{Where: Host, Reason: w.hostReason(), Plan: p, KeepsDir: keeps}, w
}

// checkText refuses text a reader could misjudge before any parsing: control
// characters, non-ASCII (look-alike letters, NBSP and other spaces bash does
// not split on) and newlines other than trailing ones.
func checkText(command string) (string, *refusal) {
	if len(command) > maxCommandLen {
		return "", refuse("the command is too long to check")
	}
	src := strings.TrimRight(command, "\n")
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case c == '\n':
			return "", refuse("a newline separates commands; only a single command line runs on the host")
		case c == '\t':
		case c < 0x20 || c > 0x7e:
			return "", refuse("non-ASCII or control characters are never run on the host")
		}
	}
	if strings.TrimSpace(src) == "" {
		return "", refuse("empty command")
	}
	return src, nil
}

// check is the syntax allowlist: one type switch over every node type the host
// may see, with a specific refusal for each known type it may not, and a
// default that refuses whatever else a parser version might produce.
func (w *walker) check(n syntax.Node) *refusal {
	switch n := n.(type) {
	case *syntax.File:
		if len(n.Last) > 0 {
			return refuse("comments are never run on the host")
		}
		if len(n.Stmts) != 1 {
			return refuse("';', '&' or a newline joins several commands; only a single command line runs on the host")
		}
		return w.check(n.Stmts[0])
	case *syntax.Stmt:
		switch {
		case len(n.Comments) > 0:
			return refuse("comments are never run on the host")
		case n.Background || n.Coprocess || n.Disown:
			return refuse("background '&' is never run on the host")
		case n.Semicolon.IsValid():
			return refuse("';' is never run on the host")
		case n.Negated:
			return refuse("'!' negation is never run on the host")
		case n.Cmd == nil:
			return refuse("a redirection without a command is never run on the host")
		}
		for _, r := range n.Redirs {
			if r := w.check(r); r != nil {
				return r
			}
		}
		return w.check(n.Cmd)
	case *syntax.BinaryCmd:
		switch n.Op {
		case syntax.AndStmt, syntax.OrStmt, syntax.Pipe, syntax.PipeAll:
		default:
			return refuse("operator %q is never run on the host", n.Op.String())
		}
		if r := w.check(n.X); r != nil {
			return r
		}
		return w.check(n.Y)
	case *syntax.CallExpr:
		if len(n.Args) == 0 {
			return refuse("a variable assignment without a command is never run on the host")
		}
		for _, a := range n.Assigns {
			if r := w.check(a); r != nil {
				return r
			}
		}
		for _, a := range n.Args {
			if r := w.check(a); r != nil {
				return r
			}
		}
		return nil
	case *syntax.Assign:
		if n.Append || n.Naked || n.Index != nil || n.Array != nil || n.Name == nil || n.Value == nil {
			return refuse("only NAME=VALUE on/off switches may prefix a host command")
		}
		return w.check(n.Value)
	case *syntax.Redirect:
		switch n.Op {
		case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
			return refuse("heredocs and here-strings are never run on the host")
		case syntax.RdrOut, syntax.RdrAll, syntax.DplOut:
		default:
			return refuse("redirection %q is never run on the host; only >/dev/null, 2>/dev/null, &>/dev/null, 2>&1 and >&2 are", n.Op.String())
		}
		if n.Hdoc != nil {
			return refuse("heredocs and here-strings are never run on the host")
		}
		if n.N != nil && n.N.Value != "1" && n.N.Value != "2" {
			return refuse("redirection of fd %q is never run on the host", n.N.Value)
		}
		return w.check(n.Word)
	case *syntax.Word:
		for _, p := range n.Parts {
			if r := w.check(p); r != nil {
				return r
			}
		}
		return nil
	case *syntax.Lit:
		return nil // its characters are checked during quote removal
	case *syntax.SglQuoted:
		if n.Dollar {
			return refuse("ANSI-C quoting $'...' is never run on the host")
		}
		return nil
	case *syntax.DblQuoted:
		if n.Dollar {
			return refuse("locale quoting $\"...\" is never run on the host")
		}
		for _, p := range n.Parts {
			if r := w.check(p); r != nil {
				return r
			}
		}
		return nil
	case *syntax.CmdSubst:
		if n.Backquotes {
			return refuse("command substitution `...` is never run on the host")
		}
		return refuse("command substitution is never run on the host")
	case *syntax.ProcSubst:
		return refuse("process substitution is never run on the host")
	case *syntax.ParamExp:
		return refuse("parameter expansion ($VAR) is never done on the host")
	case *syntax.ArithmExp:
		return refuse("arithmetic expansion $((...)) is never done on the host")
	case *syntax.ExtGlob:
		return refuse("globs are never expanded on the host")
	case *syntax.BraceExp:
		return refuse("brace expansion is never done on the host")
	case *syntax.Subshell:
		return refuse("subshells are never run on the host")
	case *syntax.Block:
		return refuse("command groups { ...; } are never run on the host")
	case *syntax.IfClause, *syntax.WhileClause, *syntax.ForClause, *syntax.CaseClause:
		return refuse("shell control flow (if, while, until, for, select, case) is never run on the host")
	case *syntax.FuncDecl:
		return refuse("function definitions are never run on the host")
	case *syntax.ArithmCmd, *syntax.LetClause:
		return refuse("arithmetic commands are never run on the host")
	case *syntax.TestClause, *syntax.TestDecl:
		return refuse("test clauses [[ ... ]] are never run on the host")
	case *syntax.DeclClause:
		return refuse("declare, local, export, readonly and typeset are never run on the host")
	case *syntax.TimeClause:
		return refuse("time is never run on the host")
	case *syntax.CoprocClause:
		return refuse("coproc is never run on the host")
	case *syntax.Comment:
		return refuse("comments are never run on the host")
	default:
		w.unhandled = append(w.unhandled, fmt.Sprintf("%T", n))
		return refuse("unsupported shell syntax (%T) is never run on the host", n)
	}
}

// andOr is one element of a flattened && / || list.
type andOr struct {
	op   string // "", "&&" or "||"
	stmt *syntax.Stmt
}

// flattenAndOr lists the pipelines of an && / || list in source order, which
// is the order the shell evaluates them in whatever shape the tree has.
func flattenAndOr(s *syntax.Stmt, op string, out *[]andOr) *refusal {
	b, ok := s.Cmd.(*syntax.BinaryCmd)
	if !ok || (b.Op != syntax.AndStmt && b.Op != syntax.OrStmt) {
		*out = append(*out, andOr{op: op, stmt: s})
		return nil
	}
	if len(s.Redirs) > 0 {
		return refuse("redirecting a whole && / || list is never run on the host")
	}
	if r := flattenAndOr(b.X, op, out); r != nil {
		return r
	}
	return flattenAndOr(b.Y, b.Op.String(), out)
}

// piped is one command of a flattened pipeline.
type piped struct {
	stmt      *syntax.Stmt
	stderrToo bool // followed by |&
}

func flattenPipe(s *syntax.Stmt, out *[]piped) *refusal {
	b, ok := s.Cmd.(*syntax.BinaryCmd)
	if !ok {
		*out = append(*out, piped{stmt: s})
		return nil
	}
	if b.Op != syntax.Pipe && b.Op != syntax.PipeAll {
		return refuse("&& or || inside a pipeline is never run on the host")
	}
	if len(s.Redirs) > 0 {
		return refuse("redirecting a whole pipeline is never run on the host")
	}
	if r := flattenPipe(b.X, out); r != nil {
		return r
	}
	if b.Op == syntax.PipeAll {
		(*out)[len(*out)-1].stderrToo = true
	}
	return flattenPipe(b.Y, out)
}

// plan interprets a tree that passed check.
func (w *walker) plan(f *syntax.File) (*Plan, *refusal) {
	cwd, r := w.locate(w.cwd, "the working directory")
	if r != nil {
		return nil, r
	}
	var items []andOr
	if r := flattenAndOr(f.Stmts[0], "", &items); r != nil {
		return nil, r
	}
	dir := cwd
	if isCd(items[0].stmt) {
		if len(items) < 2 || items[1].op != "&&" {
			return nil, refuse("cd is allowed only as a leading \"cd DIR &&\"")
		}
		if dir, r = w.cd(cwd, items[0].stmt); r != nil {
			return nil, r
		}
		items = items[1:]
		items[0].op = ""
	}
	p := &Plan{Dir: dir.abs()}
	for _, it := range items {
		var cmds []piped
		if r := flattenPipe(it.stmt, &cmds); r != nil {
			return nil, r
		}
		step := Step{Op: it.op}
		for i, pc := range cmds {
			c, r := w.command(dir, pc, i)
			if r != nil {
				return nil, r
			}
			step.Pipeline = append(step.Pipeline, c)
		}
		p.Steps = append(p.Steps, step)
	}
	if len(w.matched) == 0 {
		return nil, refuse("no listed host command; glue alone runs in the sandbox")
	}
	return p, nil
}

// isCd reports whether s is a simple command whose first word is cd.
func isCd(s *syntax.Stmt) bool {
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 {
		return false
	}
	name, r := unquote(call.Args[0])
	return r == nil && name == "cd"
}

func (w *walker) cd(cwd location, s *syntax.Stmt) (location, *refusal) {
	call := s.Cmd.(*syntax.CallExpr)
	if len(s.Redirs) > 0 || len(call.Assigns) > 0 {
		return location{}, refuse("cd takes no redirections or env prefixes on the host")
	}
	if len(call.Args) < 2 {
		return location{}, refuse("cd on the host takes exactly one directory")
	}
	dir, r := unquote(call.Args[1])
	if r != nil {
		return location{}, r
	}
	if dir == "" || dir[0] == '-' {
		return location{}, refuse("cd options and \"cd -\" are never run on the host")
	}
	if len(call.Args) != 2 {
		return location{}, refuse("cd on the host takes exactly one directory")
	}
	return w.resolve(cwd, dir, mustBeDir)
}

var filterNames = map[string]bool{
	"grep": true, "jq": true, "head": true, "tail": true, "sort": true,
	"uniq": true, "cut": true, "tr": true, "wc": true,
}

// command interprets the i-th command of a pipeline.
func (w *walker) command(dir location, pc piped, i int) (Cmd, *refusal) {
	call, ok := pc.stmt.Cmd.(*syntax.CallExpr)
	if !ok {
		return Cmd{}, refuse("only simple commands are run on the host")
	}
	words := make([]string, len(call.Args))
	for j, a := range call.Args {
		s, r := unquote(a)
		if r != nil {
			return Cmd{}, r
		}
		words[j] = s
	}
	c := Cmd{Words: words, Dir: dir.abs(), Stdout: StreamStdout, Stderr: StreamStderr}
	if r := redirect(&c, pc.stmt.Redirs); r != nil {
		return Cmd{}, r
	}
	if pc.stderrToo {
		c.Stderr = c.Stdout
	}
	name := words[0]
	switch {
	case name == "cd":
		return Cmd{}, refuse("cd is allowed only as a leading \"cd DIR &&\"")
	case name == "echo" || name == "printf":
		if i != 0 {
			return Cmd{}, refuse("%s must start its pipeline on the host", name)
		}
		if len(call.Assigns) > 0 {
			return Cmd{}, refuse("env prefixes are accepted only on git commands")
		}
		out, r := render(name, words[1:])
		if r != nil {
			return Cmd{}, r
		}
		c.Kind, c.Output = KindBuiltin, out
	case filterNames[name]:
		if i == 0 {
			return Cmd{}, refuse("%s must read a pipe from a host command or echo/printf", name)
		}
		if len(call.Assigns) > 0 {
			return Cmd{}, refuse("env prefixes are accepted only on git commands")
		}
		if r := checkFilter(name, words[1:]); r != nil {
			return Cmd{}, r
		}
		c.Kind, c.Args = KindFilter, words
	default:
		if r := w.hostCommand(dir, &c, call.Assigns); r != nil {
			return Cmd{}, r
		}
		if i != 0 {
			return Cmd{}, refuse("%s must start its pipeline on the host", c.Prefix)
		}
	}
	return c, nil
}

// redirect applies the fd-only redirections in order, as the shell does.
func redirect(c *Cmd, redirs []*syntax.Redirect) *refusal {
	for _, rd := range redirs {
		fd := "1"
		if rd.N != nil {
			fd = rd.N.Value
		}
		word, r := unquote(rd.Word)
		if r != nil {
			return r
		}
		set := func(fd string, s Stream) {
			if fd == "2" {
				c.Stderr = s
			} else {
				c.Stdout = s
			}
		}
		switch {
		case rd.Op == syntax.RdrOut && word == "/dev/null":
			set(fd, StreamNull)
		case (rd.Op == syntax.RdrAll || (rd.Op == syntax.DplOut && rd.N == nil)) && word == "/dev/null":
			c.Stdout, c.Stderr = StreamNull, StreamNull
		case rd.Op == syntax.DplOut && word == "1":
			set(fd, c.Stdout)
		case rd.Op == syntax.DplOut && word == "2":
			set(fd, c.Stderr)
		default:
			return refuse("redirection to %q is never run on the host; only >/dev/null, 2>/dev/null, &>/dev/null, 2>&1 and >&2 are", word)
		}
	}
	return nil
}

func (w *walker) hostReason() string {
	var seen []string
	for _, m := range w.matched {
		if !contains(seen, m) {
			seen = append(seen, m)
		}
	}
	if len(seen) == 1 {
		return "host: " + seen[0] + " (listed host command)"
	}
	return "host: " + strings.Join(seen, ", ") + " (listed host commands)"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
