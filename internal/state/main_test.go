package state

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The test binary doubles as a second process for the cross-process tests:
// with helperEnv set it runs one helper and exits instead of the tests.
const (
	helperEnv     = "INFRAKIT_STATE_TEST_HELPER" // "hold" | "write-loop"
	helperPathEnv = "INFRAKIT_STATE_TEST_PATH"
	helperOpEnv   = "INFRAKIT_STATE_TEST_OP"
	helperNEnv    = "INFRAKIT_STATE_TEST_N"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := runHelper(mode); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func runHelper(mode string) error {
	l := NewLocal(os.Getenv(helperPathEnv))
	switch mode {
	case "hold":
		// Take the lock, say so, hold it until stdin closes (or SIGKILL).
		unlock, err := l.Lock(context.Background(), LockInfo{Operation: os.Getenv(helperOpEnv)})
		if err != nil {
			return err
		}
		fmt.Println("locked")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		return unlock()
	case "write-loop":
		// Read-modify-write N times (forever when N is 0), each under the
		// lock, printing every serial written, so the parent can count or
		// kill it in the middle of a write.
		n, _ := strconv.Atoi(os.Getenv(helperNEnv))
		for i := 0; n == 0 || i < n; i++ {
			serial, err := lockedIncrement(l, fmt.Sprintf("p%d-%d", os.Getpid(), i))
			if err != nil {
				return err
			}
			fmt.Println(serial)
		}
		return nil
	default:
		return fmt.Errorf("unknown helper mode %q", mode)
	}
}

// lockedIncrement is the CLI's pattern: lock, read, change, write, unlock.
func lockedIncrement(l *Local, marker string) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	unlock, err := l.Lock(ctx, LockInfo{Operation: "test"})
	if err != nil {
		return 0, err
	}
	doc, err := l.Read(ctx)
	if err != nil {
		return 0, errors.Join(err, unlock())
	}
	addMarker(doc, marker)
	if err := l.Write(ctx, doc); err != nil {
		return 0, errors.Join(err, unlock())
	}
	return doc.Serial, unlock()
}

// casIncrement is the lock-free pattern: read, change, write, retry on a
// serial conflict.
func casIncrement(l *Local, marker string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		doc, err := l.Read(ctx)
		if err != nil {
			return err
		}
		addMarker(doc, marker)
		err = l.Write(ctx, doc)
		if !errors.Is(err, ErrSerialMoved) {
			return err
		}
	}
}

// addMarker records one write in the document, so lost updates show.
func addMarker(doc *Document, marker string) {
	g := doc.Group("markers")
	g.Instances = append(g.Instances, Instance{ID: marker})
}

func markers(doc *Document) map[string]bool {
	out := map[string]bool{}
	if g := doc.Groups["markers"]; g != nil {
		for _, in := range g.Instances {
			out[in.ID] = true
		}
	}
	return out
}

// helper starts the test binary as a helper process. It is killed and
// reaped at cleanup whatever happens.
type helper struct {
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	out   *bufio.Scanner
}

func startHelper(t *testing.T, mode, path string, env ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=" + mode, helperPathEnv + "=" + path}, env...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return h
}

// line waits for the helper's next output line.
func (h *helper) line(t *testing.T) string {
	t.Helper()
	if !h.out.Scan() {
		t.Fatalf("helper pid %d ended without output (err %v)", h.cmd.Process.Pid, h.out.Err())
	}
	return h.out.Text()
}
