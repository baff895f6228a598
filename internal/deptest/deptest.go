// Package deptest checks what a package imports, as tailscale's
// tstest/deptest does: each promise about a package's dependencies is a test
// that lists the package's imports with `go list -deps -json` (for each GOOS
// the package is built for) and fails naming every forbidden package and the
// chain of imports that brings it in.
package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// Rule is one promise about a package's imports (not its tests' imports).
type Rule struct {
	// Package is the import path checked.
	Package string
	// GOOS lists the systems to check it for; nil means linux only.
	GOOS []string
	// OnlyStd, when set, allows only the standard library and the packages
	// in Allow. What an allowed package imports itself is not judged.
	OnlyStd bool
	Allow   []string
	// Bad maps forbidden import paths to the reason. A key ending in "/"
	// forbids every package below it ("k8s.io/"); any other key forbids
	// that package and every package below it.
	Bad map[string]string
}

// Pkg is what `go list -json` says of one package.
type Pkg struct {
	ImportPath string
	Standard   bool
	Imports    []string
	Error      *struct{ Err string }
}

// Check runs the rule for each of its GOOS and fails t for each violation.
func (r Rule) Check(t *testing.T) {
	t.Helper()
	goos := r.GOOS
	if goos == nil {
		goos = []string{"linux"}
	}
	for _, g := range goos {
		pkgs, err := List(r.Package, g)
		if err != nil {
			t.Fatalf("GOOS=%s: %v", g, err)
		}
		for _, v := range r.Violations(pkgs) {
			t.Errorf("GOOS=%s: %s", g, v)
		}
	}
}

// List runs `go list -deps -json` on pkg for goos (CGO_ENABLED=0, as sbx is
// built) and returns the packages it names by import path.
func List(pkg, goos string) (map[string]Pkg, error) {
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard,Imports,Error", pkg)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %v: %s (is the go command on PATH?)", pkg, err, strings.TrimSpace(stderr.String()))
	}
	pkgs := map[string]Pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list -deps %s: read its JSON: %v", pkg, err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list -deps %s: package %s: %s", pkg, p.ImportPath, p.Error.Err)
		}
		pkgs[p.ImportPath] = p
	}
	if _, ok := pkgs[pkg]; !ok {
		return nil, fmt.Errorf("go list -deps %s: the package itself is not in the list (give its full import path)", pkg)
	}
	return pkgs, nil
}

// Violations walks the imports from r.Package through pkgs and describes
// each package the rule forbids, with the import chain that reaches it.
// It does not descend into a forbidden package, nor into an allowed one.
func (r Rule) Violations(pkgs map[string]Pkg) []string {
	via := map[string]string{r.Package: ""}
	queue := []string{r.Package}
	var out []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p != r.Package {
			if why, bad := r.forbidden(p, pkgs[p]); bad {
				out = append(out, fmt.Sprintf("%s imports %s (%s): %s", r.Package, p, why, chain(via, p)))
				continue
			}
			if r.allowed(p) {
				continue
			}
		}
		imps := append([]string(nil), pkgs[p].Imports...)
		sort.Strings(imps)
		for _, q := range imps {
			if _, seen := via[q]; !seen {
				via[q] = p
				queue = append(queue, q)
			}
		}
	}
	return out
}

func (r Rule) forbidden(p string, info Pkg) (string, bool) {
	for k, why := range r.Bad {
		if p == strings.TrimSuffix(k, "/") || strings.HasPrefix(p, strings.TrimSuffix(k, "/")+"/") {
			return why, true
		}
	}
	if r.OnlyStd && !info.Standard && !r.allowed(p) {
		return "only the standard library is allowed", true
	}
	return "", false
}

func (r Rule) allowed(p string) bool {
	for _, a := range r.Allow {
		if p == a {
			return true
		}
	}
	return false
}

// chain is the import path from the root to p, as "a -> b -> p".
func chain(via map[string]string, p string) string {
	var c []string
	for ; p != ""; p = via[p] {
		c = append(c, p)
	}
	for i, j := 0, len(c)-1; i < j; i, j = i+1, j-1 {
		c[i], c[j] = c[j], c[i]
	}
	return strings.Join(c, " -> ")
}
