package command

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/internal/syncbuf"
	"github.com/infrakit/infrakit/internal/testwait"
)

func watchCmd(m Meta) cli.Command      { return &WatchCommand{Meta: m} }
func stopUpdateCmd(m Meta) cli.Command { return &GroupStopUpdateCommand{Meta: m} }

// backgroundWatch runs `infrakit watch` in-process until stop.
type backgroundWatch struct {
	stdout, stderr *syncbuf.Buffer
	stop           context.CancelFunc
	code           chan int
}

func startWatch(t *testing.T, wd string, args ...string) *backgroundWatch {
	t.Helper()
	b := &backgroundWatch{stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}, code: make(chan int, 1)}
	m := NewMeta(wd, strings.NewReader(""), b.stdout, b.stderr)
	ctx, cancel := context.WithCancel(context.Background())
	m.ShutdownCtx = ctx
	b.stop = cancel
	go func() { b.code <- watchCmd(m).Run(args) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-b.code:
		case <-time.After(40 * time.Second):
			t.Error("watch did not stop")
		}
	})
	return b
}

// address waits for the line saying where the API is served.
func (b *backgroundWatch) address(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if out := b.stdout.String(); strings.Contains(out, "serving http://") {
			rest := out[strings.Index(out, "http://")+len("http://"):]
			return rest[:strings.Index(rest, "/")]
		}
		select {
		case code := <-b.code:
			t.Fatalf("watch exited %d\n%s%s", code, b.stdout, b.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("watch did not start\n%s%s", b.stdout, b.stderr)
	return ""
}

func TestWatchBadArguments(t *testing.T) {
	for _, args := range [][]string{{"extra"}, {"-interval", "0s"}, {"-parallelism", "0"}, {"-call-timeout", "0s"}, {"-bogus"}} {
		code, _, stderr := runCommand(t, watchCmd, t.TempDir(), args...)
		if code != cli.RunResultHelp || stderr == "" {
			t.Errorf("watch %q: exit %d, stderr %q; want the usage", args, code, stderr)
		}
	}
	code, _, stderr := runCommand(t, watchCmd, t.TempDir(), "-listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(stderr, "infrakit init") {
		t.Errorf("watch without init: exit %d, stderr %q; want 1 and a hint to run init", code, stderr)
	}
}

// The command end to end in-process: it serves, heals, refuses a second
// watch naming the first, shows up in `group describe` as a roll's progress
// after stop-update, and stops with exit 0 when its context is cancelled.
func TestWatchCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and launches providers")
	}
	bin := buildProviders(t)
	wd := t.TempDir()
	writeStack(t, wd, groupStack)
	if code, _, stderr := runCommand(t, initCmd, wd, "-plugin-dir", bin); code != 0 {
		t.Fatalf("init: exit %d: %s", code, stderr)
	}
	applyStack(t, wd)

	w := startWatch(t, wd, "-listen", "127.0.0.1:0", "-interval", "1s")
	addr := w.address(t)
	// (Not every provider this process runs: apply's may still be
	// stopping.)
	want := cmp.Or(os.Getenv("GOGC"), "50")
	testwait.For(t, 30*time.Second, "the providers of watch (simulator, vanilla) running with GOGC="+want, func() bool {
		n := 0
		for _, v := range providerGOGC(t) {
			if v == want {
				n++
			}
		}
		return n >= 2
	})

	code, _, stderr := runCommand(t, watchCmd, wd, "-listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(stderr, "Watch is already running") || !strings.Contains(stderr, addr) ||
		!strings.Contains(stderr, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("second watch: exit %d, stderr:\n%s\nwant 1, naming the first (pid %d, %s)", code, stderr, os.Getpid(), addr)
	}

	files := simulatorFiles(t, wd)
	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for len(simulatorFiles(t, wd)) != len(files) {
		if time.Now().After(deadline) {
			t.Fatalf("the removed instance was not replaced\n%s", w.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The provider writes the file before the watch logs the create.
	for !strings.Contains(w.stderr.String(), "created instance: group=") {
		if time.Now().After(deadline) {
			t.Fatalf("the log has no group field:\n%s", w.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// stop-update marks the state; describe shows it; apply clears it.
	code, stdout, stderr := runCommand(t, stopUpdateCmd, wd, "web")
	if code != 0 || !strings.Contains(stdout, "no roll in progress") {
		t.Errorf("group stop-update web: exit %d\n%s%s", code, stdout, stderr)
	}
	if !readState(t, wd).Groups["web"].UpdateStopped {
		t.Error("stop-update did not mark the state")
	}
	code, stdout, _ = runCommand(t, groupDescribeCmd, wd, "web")
	if code != 0 || !strings.Contains(stdout, "Rolling update: stopped by group stop-update") {
		t.Errorf("group describe web after stop-update:\n%s", stdout)
	}
	code, stdout, _ = runCommand(t, groupDescribeCmd, wd, "web", "-json")
	var g groupJSON
	if code != 0 || json.Unmarshal([]byte(stdout), &g) != nil || !g.Rolling.Stopped {
		t.Errorf("group describe -json after stop-update: %s", stdout)
	}
	if code, _, stderr := runCommand(t, stopUpdateCmd, wd, "nope"); code != 1 || !strings.Contains(stderr, "nope") {
		t.Errorf("stop-update of an unknown group: exit %d %s", code, stderr)
	}
	// apply with watch running waits for a pass that holds the lock.
	code, stdout, stderr = runCommand(t, applyCmd, wd, "-auto-approve", "-lock-timeout", "20s")
	if code != 0 {
		t.Fatalf("apply with watch running: exit %d\n%s%s", code, stdout, stderr)
	}
	if readState(t, wd).Groups["web"].UpdateStopped {
		t.Error("apply did not clear the stop-update mark")
	}

	w.stop()
	select {
	case code := <-w.code:
		w.code <- code
		if code != 0 || !strings.Contains(w.stdout.String(), "infrakit watch stopped.") {
			t.Errorf("watch stopped with exit %d\n%s%s", code, w.stdout, w.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("watch did not stop within 30s")
	}
	if _, err := os.Stat(filepath.Join(wd, operation.StateFile)); err != nil {
		t.Fatal(err)
	}
}

func readState(t *testing.T, wd string) *state.Document {
	t.Helper()
	doc, err := state.NewLocal(filepath.Join(wd, operation.StateFile)).Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// watch runs its providers, and itself while idle, at GOGC=50 unless GOGC
// is set, which the providers then inherit as it is.
func TestWatchGC(t *testing.T) {
	unset := func(string) (string, bool) { return "", false }
	if p, env := watchGC(unset); p != 50 || !slices.Equal(env, []string{"GOGC=50"}) {
		t.Errorf("without GOGC: %d, %q; want 50 while idle and GOGC=50 for the providers", p, env)
	}
	set := func(k string) (string, bool) { return "200", k == "GOGC" }
	if p, env := watchGC(set); p != 0 || env != nil {
		t.Errorf("with GOGC=200: %d, %q; want it left alone", p, env)
	}
}

// providerGOGC is the GOGC of the environment of each provider process
// this test process started, by pid.
func providerGOGC(t *testing.T) map[int]string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // ended meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after ')'.
		fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) || !bytes.Contains(b, []byte("(infrakit-provid")) {
			continue
		}
		dir := filepath.Dir(p)
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		out[pid] = ""
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("GOGC=")); ok {
				out[pid] = string(v)
			}
		}
	}
	return out
}
