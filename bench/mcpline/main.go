// Command mcpline times warm `bash true` calls through one or more sbx-mcp
// binaries over stdio with a minimal client (one JSON-RPC line out, one
// in: none of the Go SDK client's own decoding, as with a client in another
// language), alternating between the binaries call by call on one empty
// code dir each, and prints for each the median, p10 and p90 of a call and
// the server process's CPU per call (from /proc, Linux only): compare a
// build before a change with one after it in the same run.
//
//	go build -o /tmp/mcp-before ./cmd/sbx-mcp   # in the tree before
//	go build -o /tmp/mcp-after ./cmd/sbx-mcp
//	N=300 go run ./bench/mcpline /tmp/mcp-before /tmp/mcp-after
//
// With TREE and CHANGED set, each binary gets a copy of TREE for its code
// dir (the copies in TMPDIR), and before each timed call CHANGED of its
// regular files (the first in name order) have a line appended: the round
// that pushes them. `tar c | tar x` of the same files, just changed, is
// timed in the same loop, the cost of moving them.
//
//	TREE=/dev/shm/t100k CHANGED=1000 N=16 go run ./bench/mcpline /tmp/mcp-before /tmp/mcp-after
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

type srv struct {
	name string
	cmd  *exec.Cmd
	in   *bufio.Writer
	out  *bufio.Reader
	id   int
	ds   []time.Duration
}

func cpu(pid int) time.Duration {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.Atoi(f[11])
	k, _ := strconv.Atoi(f[12])
	return time.Duration(u+k) * 10 * time.Millisecond
}

func (s *srv) send(method, params string) string {
	s.id++
	fmt.Fprintf(s.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", s.id, method, params)
	s.in.Flush()
	line, err := s.out.ReadString('\n')
	if err != nil {
		fail("%s: no answer to %s (did it start? its stderr is above): %v", s.name, method, err)
	}
	return line
}

func main() {
	n, _ := strconv.Atoi(os.Getenv("N"))
	if n == 0 {
		n = 200
	}
	if len(os.Args) < 2 {
		fail("usage: mcpline SBX-MCP-BINARY...")
	}
	tmp, err := os.MkdirTemp("", "mcpline")
	if err != nil {
		fail("%v", err)
	}
	defer os.RemoveAll(tmp)
	tree := os.Getenv("TREE")
	changed, _ := strconv.Atoi(os.Getenv("CHANGED"))
	var ss []*srv
	var lists [][]string
	for i, bin := range os.Args[1:] {
		dir := filepath.Join(tmp, strconv.Itoa(i))
		os.MkdirAll(dir, 0o755)
		if tree != "" {
			if out, err := exec.Command("cp", "-a", tree+"/.", dir).CombinedOutput(); err != nil {
				fail("copy %s: %v: %s", tree, err, out)
			}
			lists = append(lists, firstFiles(dir, changed))
		}
		cmd := exec.Command(bin, "--session", "mcpline"+strconv.Itoa(i), "--code-dir", dir)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+filepath.Join(tmp, "state"), "XDG_CONFIG_HOME="+filepath.Join(tmp, "config"))
		cmd.Stderr = os.Stderr
		w, _ := cmd.StdinPipe()
		r, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			fail("start %s: %v", bin, err)
		}
		s := &srv{name: bin, cmd: cmd, in: bufio.NewWriter(w), out: bufio.NewReaderSize(r, 1<<20)}
		s.send("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mcpline","version":"1"}}`)
		fmt.Fprintf(s.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
		ss = append(ss, s)
	}
	call := `{"name":"bash","arguments":{"command":"true"}}`
	for range 10 {
		for _, s := range ss {
			if l := s.send("tools/call", call); !strings.Contains(l, "Exit code: 0") {
				fail("%s: bash true did not succeed: %.500s", s.name, l)
			}
		}
	}
	cpu0 := make([]time.Duration, len(ss))
	for i, s := range ss {
		cpu0[i] = cpu(s.cmd.Process.Pid)
	}
	var tars []time.Duration
	for k := range n {
		for i, s := range ss {
			if changed > 0 {
				edit(lists[i], k)
			}
			t := time.Now()
			s.send("tools/call", call)
			s.ds = append(s.ds, time.Since(t))
		}
		if changed > 0 {
			tars = append(tars, tarTime(filepath.Join(tmp, "0"), lists[0], filepath.Join(tmp, "tar")))
		}
	}
	if len(tars) > 0 {
		slices.Sort(tars)
		fmt.Printf("%-40s median %6.3f ms (tar c | tar x of the %d files, just changed)\n", "tar", float64(tars[n/2].Microseconds())/1000, changed)
	}
	for i, s := range ss {
		c := cpu(s.cmd.Process.Pid) - cpu0[i]
		slices.Sort(s.ds)
		fmt.Printf("%-40s median %6.3f ms  p10 %6.3f  p90 %6.3f  server CPU %5.3f ms/call\n", s.name, float64(s.ds[n/2].Microseconds())/1000, float64(s.ds[n/10].Microseconds())/1000, float64(s.ds[n*9/10].Microseconds())/1000, float64(c.Microseconds())/1000/float64(n))
		s.send("tools/call", `{"name":"release","arguments":{}}`)
		s.in.Flush()
	}
	for _, s := range ss {
		s.cmd.Process.Signal(os.Interrupt)
		s.cmd.Wait()
	}
}

// firstFiles lists the first k regular files under dir in name order
// (.git left out), as paths relative to dir.
func firstFiles(dir string, k int) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || len(out) >= k {
			return filepath.SkipAll
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	if len(out) < k {
		fail("%s has fewer than %d files", dir, k)
	}
	return out
}

// edit appends a line to each file.
func edit(files []string, k int) {
	for _, f := range files {
		fh, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			fail("edit %s: %v", f, err)
		}
		fmt.Fprintf(fh, "// edit %d\n", k)
		fh.Close()
	}
}

// tarTime times `tar c | tar x` of files into a new dir to.
func tarTime(root string, files []string, to string) time.Duration {
	os.RemoveAll(to)
	os.MkdirAll(to, 0o755)
	list := to + ".list"
	var b strings.Builder
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		b.WriteString(rel + "\n")
	}
	os.WriteFile(list, []byte(b.String()), 0o644)
	t := time.Now()
	c := exec.Command("/bin/sh", "-c", "tar cf - -T "+list+" | tar xf - -C "+to)
	c.Dir = root
	if out, err := c.CombinedOutput(); err != nil {
		fail("tar: %v: %s", err, out)
	}
	return time.Since(t)
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "mcpline: "+format+"\n", a...)
	os.Exit(1)
}
