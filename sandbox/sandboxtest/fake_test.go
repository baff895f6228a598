package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/sbx-sh/sbx/sandbox"
)

// fakePrograms are RunContract's commands as Fake.Run funcs.
var fakePrograms = Programs{
	Exit:  func(code int) []string { return []string{"fake-exit", strconv.Itoa(code)} },
	Block: []string{"fake-block"},
}

func fakeRun(ctx context.Context, cmd *sandbox.Cmd) (sandbox.Result, error) {
	switch cmd.Argv[0] {
	case "fake-exit":
		code, err := strconv.Atoi(cmd.Argv[1])
		return sandbox.Result{ExitCode: code}, err
	case "fake-block":
		fmt.Fprint(cmd.Stdout, "started\n")
		<-ctx.Done()
		return sandbox.Result{}, ctx.Err()
	}
	return sandbox.Result{ExitCode: 127}, nil
}

func fakeBackend(f *Fake) Backend {
	return Backend{
		New: func(t *testing.T, l sandbox.Limits) sandbox.Sandbox {
			sb, err := f.Claim(context.Background(), sandbox.Spec{Name: t.Name(), StateDir: t.TempDir(), Limits: l})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sb.Release(context.Background()) })
			return sb
		},
		Lose:     func(t *testing.T, sb sandbox.Sandbox) { sb.(*FakeSandbox).Lose() },
		Programs: &fakePrograms,
	}
}

// TestFakeConforms: the fake keeps the contract's own promises, so a
// lifecycle test on it tests an engine against the contract.
func TestFakeConforms(t *testing.T) {
	f := &Fake{Run: fakeRun}
	RunContract(t, fakeBackend(f))
	// One shared, one each for Release, ReleaseKillsRunning and LostMidCommand.
	if n := f.Claims(); n != 4 {
		t.Errorf("%d claims, want RunContract's 4", n)
	}
}

// TestFakeHooks: Block holds the matching command only, Attach finds what
// Claim handed out by its state dir, a lost sandbox is stale.
func TestFakeHooks(t *testing.T) {
	ctx := context.Background()
	f := &Fake{}
	dir := t.TempDir()
	sb, err := f.Claim(ctx, sandbox.Spec{Name: "h", StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	g := f.Block("held")
	done := make(chan error, 1)
	go func() {
		_, err := sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"sh", "-c", "held one"}})
		done <- err
	}()
	<-g.Started()
	if _, err := sb.Exec(ctx, &sandbox.Cmd{Argv: []string{"other"}}); err != nil {
		t.Fatalf("a command the gate does not match ran into it: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the held command ended before Release: %v", err)
	default:
	}
	g.Release()
	if err := <-done; err != nil {
		t.Fatalf("the held command after Release: %v", err)
	}
	if got, err := f.Attach(ctx, sandbox.Spec{Name: "h", StateDir: dir}); err != nil || got != sb {
		t.Fatalf("Attach by state dir: %v %v", got, err)
	}
	if _, err := f.Attach(ctx, sandbox.Spec{Name: "h", StateDir: t.TempDir()}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Attach elsewhere: %v, want ErrNotFound", err)
	}
	sb.(*FakeSandbox).Lose()
	var stale *sandbox.StaleError
	if _, err := f.Attach(ctx, sandbox.Spec{Name: "h", StateDir: dir}); !errors.As(err, &stale) {
		t.Fatalf("Attach of a lost sandbox: %v, want a StaleError", err)
	}
	sb.Release(ctx)
	if _, err := f.Attach(ctx, sandbox.Spec{Name: "h", StateDir: dir}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("Attach of a released sandbox: %v, want ErrNotFound", err)
	}
	select {
	case <-sb.(*FakeSandbox).Released():
	default:
		t.Fatal("Released not closed after Release")
	}
}
