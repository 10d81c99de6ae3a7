package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/state"
)

// privateTmpfs mounts a tmpfs of size bytes at dir in a mount namespace of
// its own (unshare -m, held by a sleeping process), invisible to the rest
// of the machine, and returns the holder's pid: commands run in it with
// nsenter, and /proc/PID/root shows its files. Skipped unless root with
// unshare and nsenter.
func privateTmpfs(t *testing.T, dir string, size int) int {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	for _, tool := range []string{"unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		fmt.Sprintf("mount -t tmpfs -o size=%d tmpfs %s && echo mounted && exec sleep 3600", size, dir))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Skipf("unshare: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "mounted" {
		t.Skipf("cannot mount a private tmpfs: %q, %v", line, err)
	}
	return cmd.Process.Pid
}

// inNS runs infrakit in the mount namespace of pid, in w.dir.
func (w *workdir) inNS(pid int, args ...string) result {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", nsArgs(pid, w.dir, args)...)
	cmd.Env = w.env
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	if exit, ok := err.(*exec.ExitError); ok {
		res.code = exit.ExitCode()
	} else if err != nil {
		w.t.Fatalf("nsenter infrakit %v: %v", args, err)
	}
	return res
}

// nsArgs are nsenter's arguments to run infrakit with args in dir inside
// pid's mount namespace. The shell changes directory once inside: a
// directory entered before (nsenter --wd) is the one the tmpfs hides.
func nsArgs(pid int, dir string, args []string) []string {
	return append([]string{"-t", strconv.Itoa(pid), "-m", "--", "sh", "-c", `cd "$0" && exec "$@"`,
		dir, filepath.Join(binDir, "infrakit")}, args...)
}

// fill leaves about keep bytes free on the file system of path (seen
// through /proc/PID/root) by writing a filler file there; removing it frees
// the space again.
func fill(t *testing.T, path string, keep int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	filler := filepath.Join(path, "filler")
	if err := os.WriteFile(filler, make([]byte, max(free-keep, 0)), 0o600); err != nil {
		t.Fatal(err)
	}
	return filler
}

// With the disk full, an apply that scales 5 → 60 either stops before it
// acts (the intent could not be written) or records the desired size
// before its first create, as here: the intent fits, the members' record
// does not. Then plan shows no false "No changes" with instances the watch
// would take away: the recorded size is 60, and once space is back watch
// records the 55 members it finds and destroys none of them.
func TestFullDiskApplyKeepsItsIntent(t *testing.T) {
	w := newWorkdir(t)
	outside := t.TempDir()
	pid := privateTmpfs(t, w.dir, 256<<10)
	root := filepath.Join("/proc", strconv.Itoa(pid), "root") + w.dir
	simDir := filepath.Join(outside, "sim")
	w.env = append(w.env, "INFRAKIT_SIMULATOR_DIR="+simDir)
	// The providers and the simulator live outside the small tmpfs.
	if err := os.Mkdir(filepath.Join(outside, "dot"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "dot"), filepath.Join(root, ".infrakit")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "stack.hcl"), []byte(hardStack(5, []string{"p1"})), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := w.inNS(pid, "init", "-plugin-dir", binDir); res.code != 0 {
		t.Fatal(res)
	}
	if res := w.inNS(pid, "apply", "-auto-approve"); res.code != 0 {
		t.Fatal(res)
	}
	statePath := filepath.Join(root, "infrakit.state.json")
	before, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "stack.hcl"), []byte(hardStack(60, []string{"p1"})), 0o644); err != nil {
		t.Fatal(err)
	}
	// Room for the intent (a state the size of the current one), not for
	// sixty members.
	filler := fill(t, root, int64(len(before))+8<<10)

	res := w.inNS(pid, "apply", "-auto-approve")
	if res.code == 0 || !strings.Contains(res.stderr, "no space left on device") {
		t.Fatalf("apply on a full disk: want a failure saying so; %s", res)
	}
	doc := readState(t, statePath)
	made := len(simulated(t, simDir)["cattle"])
	g := doc.Stack.Group("cattle")
	switch {
	case made == 5:
		t.Logf("the intent could not be written either: nothing was made")
	case g == nil || g.Size == nil || *g.Size != 60:
		t.Fatalf("%d cattle made, but the state records size %v: the intent was not durable before the first create", made, g.Size)
	}
	t.Logf("%d cattle exist after the failed apply; the state records %d of them, size %d", made, len(doc.Groups["cattle"].Instances), *g.Size)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if res := w.inNS(pid, "plan", "-detailed-exitcode"); res.code == 1 {
		t.Fatal(res)
	} else if made == 60 && res.code != 0 {
		t.Fatalf("all 60 exist and 60 are recorded as desired: want no changes; %s", res)
	}

	// A watch pass records the members it finds and destroys none.
	cmd := exec.Command("nsenter", nsArgs(pid, w.dir, []string{"watch", "-listen", "127.0.0.1:0", "-interval", "100ms"})...)
	cmd.Env = append(w.env, "INFRAKIT_LOG=info")
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(readState(t, statePath).Groups["cattle"].Instances) != 60 {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("watch did not record 60 cattle within 60s:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if n := len(simulated(t, simDir)["cattle"]); n != 60 {
		t.Fatalf("%d cattle after watch, want 60", n)
	}
	if strings.Contains(log.String(), "destroyed instance") || strings.Contains(log.String(), "scale-down") {
		t.Fatalf("watch destroyed what the recorded intent asked for:\n%s", log.String())
	}
}

// A command waiting for the state lock says so at once on stderr, naming
// the holder, and fails after -lock-timeout naming it again.
func TestLockWaitNamesHolder(t *testing.T) {
	w := newWorkdir(t)
	w.writeFile("stack.hcl", hardStack(1, []string{"p1"}))
	w.init()
	w.ok("apply", "-auto-approve")
	unlock, err := state.NewLocal(filepath.Join(w.dir, "infrakit.state.json")).Lock(t.Context(),
		state.LockInfo{Operation: "maintenance by the test"})
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	res := w.expect(1, "apply", "-auto-approve", "-lock-timeout", "1s")
	holder := fmt.Sprintf(`"maintenance by the test" (pid %d on host`, os.Getpid())
	if !strings.Contains(res.stderr, "Waiting for the state lock") || strings.Count(res.stderr, holder) < 2 {
		t.Fatalf("want a waiting message and the failure, both naming %s; %s", holder, res)
	}
}

// A same-named stack's state copied in from another directory is refused
// by plan, apply and watch; apply -force-lineage adopts it.
func TestOtherLineageRefused(t *testing.T) {
	a, b := newWorkdir(t), newWorkdir(t)
	for _, w := range []*workdir{a, b} {
		w.writeFile("stack.hcl", hardStack(1, []string{"p1"}))
		w.init()
		w.ok("apply", "-auto-approve")
	}
	data, err := os.ReadFile(filepath.Join(b.dir, "infrakit.state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.dir, "infrakit.state.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"plan"}, {"apply", "-auto-approve"}, {"watch"}} {
		if res := a.expect(1, args...); !strings.Contains(res.stderr, "another state") || !strings.Contains(res.stderr, "-force-lineage") {
			t.Fatalf("want a refusal naming -force-lineage; %s", res)
		}
	}
	a.ok("apply", "-auto-approve", "-force-lineage")
	a.ok("plan")
}
