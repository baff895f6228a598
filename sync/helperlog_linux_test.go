package sync

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestHelperLogPlantedByACommand: the helper's state dir is the sandbox's,
// and a command there can put anything at the log's name. A fifo is never
// waited on (neither by the append nor by a new process's load), a link
// is never written through nor read, garbage and a log of another
// generation are not taken for records: each round goes on (the save is
// whole where the log is not as the helper left it), and a new process
// loads the state memory has.
func TestHelperLogPlantedByACommand(t *testing.T) {
	WatchHelper = true
	defer func() { WatchHelper = false }()
	helperSaveMin = 1
	defer func() { helperSaveMin = pushSaveMin }()
	outside := filepath.Join(t.TempDir(), "outside")
	put(t, outside, "outside\n")
	plants := map[string]func(log string){
		"fifo": func(log string) {
			if err := syscall.Mkfifo(log, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"link": func(log string) {
			if err := os.Symlink(outside, log); err != nil {
				t.Fatal(err)
			}
		},
		"garbage": func(log string) {
			os.WriteFile(log, []byte(strings.Repeat("\xff\x00\x00\x00garbage", 100)), 0o600)
		},
		"directory": func(log string) {
			if err := os.Mkdir(log, 0o700); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, plant := range plants {
		t.Run(name, func(t *testing.T) {
			p := newPair(t)
			p.h.Watch(nil)
			defer p.h.Close()
			put(t, filepath.Join(p.host, "a"), "a0")
			p.sync(nil)
			p.sync(nil)
			files, _ := filepath.Glob(filepath.Join(p.hstate, "*.state"))
			if len(files) != 1 {
				t.Fatalf("state files %v", files)
			}
			log := files[0] + stateLogSuffix
			WaitSaves()
			os.RemoveAll(log)
			plant(log)
			for i := range 3 {
				put(t, filepath.Join(p.host, "a"), fmt.Sprintf("a%d", i+1))
				err := withDeadline(t, "a round", []string{log}, func() error {
					p.sync(nil)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if got := read(t, filepath.Join(p.sandbox, "a")); got != fmt.Sprintf("a%d", i+1) {
					t.Fatalf("round %d: the sandbox has %q", i, got)
				}
				WaitSaves()
				live.Lock()
				for f, ls := range live.m {
					if f == files[0] && ls.log.current {
						var st helperState
						withDeadline(t, "a new process's load", []string{log}, func() error {
							st = loadedHelper(t, f)
							return nil
						})
						sameHelperState(t, fmt.Sprintf("round %d: the state as loaded", i), st, ls.state)
					}
				}
				live.Unlock()
			}
			if got := read(t, outside); got != "outside\n" {
				t.Errorf("written through a link at the log's name: %q", got)
			}
			// A new process goes on from the files, the thing planted
			// again beside its base.
			WaitSaves()
			os.RemoveAll(log)
			plant(log)
			live.Lock()
			for f, ls := range live.m {
				ls.watch.Close()
				delete(live.m, f)
			}
			live.Unlock()
			put(t, filepath.Join(p.host, "a"), "last")
			withDeadline(t, "a new process's round", []string{log}, func() error {
				p.sync(nil)
				return nil
			})
			p.same()
		})
	}
}
