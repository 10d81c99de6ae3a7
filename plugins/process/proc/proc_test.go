//go:build linux

package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/testwait"
)

func TestMain(m *testing.M) {
	// Orphaned grandchildren become this process's children, so the tests
	// reap them instead of leaving zombies to an init that may not.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "PR_SET_CHILD_SUBREAPER:", err)
	}
	goleak.VerifyTestMain(m)
}

// reap collects pid once it has exited, if it is a child of the test process.
func reap(pid int) {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err != nil || got == pid {
			return
		}
	}
}

func TestParseStat(t *testing.T) {
	// Fields 4-21, then starttime (22), then two of the fields after it.
	line := func(head string, start string) string {
		return head + " 0 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 " + start + " 1234 56"
	}
	for _, tc := range []struct {
		name, in string
		want     Stat
		err      string
	}{
		{
			name: "plain",
			in:   line("4242 (webserver) S 1 4242", "987654"),
			want: Stat{PID: 4242, Comm: "webserver", State: 'S', PPID: 1, PGRP: 4242, StartTime: 987654},
		},
		{
			name: "comm with spaces and parentheses",
			in:   line("17 (a) b) (c d) Z 3 9", "5"),
			want: Stat{PID: 17, Comm: "a) b) (c d", State: 'Z', PPID: 3, PGRP: 9, StartTime: 5},
		},
		{name: "no comm", in: "17 S 1 1", err: "no (comm)"},
		{name: "short", in: "17 (x) S 1 1 1", err: "want at least 20"},
		{name: "bad pid", in: "x (x) S" + strings.Repeat(" 1", 25), err: "pid"},
		{name: "bad start time", in: line("1 (x) S 1 1", "soon"), err: "starttime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseStat(%q) error = %v, want one containing %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("ParseStat = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestParseStatRoundTrip: whatever the command name holds (the kernel
// allows any bytes but NUL and newline is unusual but legal too), the
// fields after it parse back.
func TestParseStatRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		want := Stat{
			PID:       rapid.IntRange(1, 1<<22).Draw(t, "pid"),
			Comm:      rapid.StringOfN(rapid.RuneFrom([]rune("ab )( \t\n")), 0, 15, -1).Draw(t, "comm"),
			State:     rapid.SampledFrom([]byte("RSDZXT")).Draw(t, "state"),
			PPID:      rapid.IntRange(0, 1<<22).Draw(t, "ppid"),
			PGRP:      rapid.IntRange(0, 1<<22).Draw(t, "pgrp"),
			StartTime: rapid.Uint64().Draw(t, "start"),
		}
		line := fmt.Sprintf("%d (%s) %c %d %d 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 100 200\n",
			want.PID, want.Comm, want.State, want.PPID, want.PGRP, want.StartTime)
		got, err := ParseStat([]byte(line))
		if err != nil {
			t.Fatalf("ParseStat(%q): %v", line, err)
		}
		if got != want {
			t.Fatalf("ParseStat(%q) = %+v, want %+v", line, got, want)
		}
	})
}

func TestIdentityCheck(t *testing.T) {
	self, err := Identify(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self.StartTime == 0 || self.BootID == "" {
		t.Fatalf("Identify(self) = %+v, want a start time and a boot ID", self)
	}
	for _, tc := range []struct {
		name string
		id   Identity
		want Status
	}{
		{"self", self, Running},
		{"reused pid", Identity{PID: self.PID, StartTime: self.StartTime + 1, BootID: self.BootID}, Replaced},
		{"other boot", Identity{PID: self.PID, StartTime: self.StartTime, BootID: "another-boot"}, Replaced},
		{"no such pid", Identity{PID: 1 << 23, StartTime: 1, BootID: self.BootID}, Exited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.id.Check()
			if err != nil || got != tc.want {
				t.Fatalf("Check(%+v) = %v, %v; want %v", tc.id, got, err, tc.want)
			}
		})
	}
	if _, err := ReadStat(1 << 23); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadStat(no such pid) = %v, want fs.ErrNotExist", err)
	}
}

// TestZombieIsExited: a child that exited but is not reaped yet still has
// its /proc entry; it must count as exited.
func TestZombieIsExited(t *testing.T) {
	cmd := start(t, "/bin/sh", "-c", "exit 0")
	id, err := Identify(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, "the child to become a zombie", func() bool {
		s, err := ReadStat(id.PID)
		return err == nil && s.State == 'Z'
	})
	if st, err := id.Check(); err != nil || st != Exited {
		t.Fatalf("Check(zombie) = %v, %v; want exited", st, err)
	}
	_ = cmd.Wait()
	if st, err := id.Check(); err != nil || st != Exited {
		t.Fatalf("Check(reaped) = %v, %v; want exited", st, err)
	}
}

func TestWatchExit(t *testing.T) {
	t.Run("Kill", func(t *testing.T) {
		cmd := start(t, "sleep", "30")
		id := identify(t, cmd.Process.Pid)
		w, err := WatchExit(id)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		done := make(chan error, 1)
		go func() { done <- w.Wait() }()
		select {
		case err := <-done:
			t.Fatalf("Wait returned %v while the process runs", err)
		case <-time.After(50 * time.Millisecond):
		}
		killed := time.Now()
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Wait = %v, want nil", err)
			}
			if d := time.Since(killed); d > 200*time.Millisecond {
				t.Errorf("Wait returned %v after the kill; want at once", d)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Wait did not return after the process was killed")
		}
	})
	t.Run("Close", func(t *testing.T) {
		cmd := start(t, "sleep", "30")
		w, err := WatchExit(identify(t, cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- w.Wait() }()
		time.Sleep(20 * time.Millisecond)
		w.Close()
		select {
		case err := <-done:
			if !errors.Is(err, fs.ErrClosed) {
				t.Fatalf("Wait after Close = %v, want fs.ErrClosed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not end Wait")
		}
	})
	t.Run("AlreadyExited", func(t *testing.T) {
		cmd := start(t, "/bin/sh", "-c", "exit 0")
		id := identify(t, cmd.Process.Pid)
		testwait.For(t, 5*time.Second, "the child to exit", func() bool { st, _ := id.Check(); return st == Exited })
		// Either refused as not running, or ready at once: both say "exited".
		w, err := WatchExit(id)
		if err != nil {
			if !errors.Is(err, ErrNotRunning) {
				t.Fatalf("WatchExit(exited) = %v, want ErrNotRunning", err)
			}
			return
		}
		defer w.Close()
		if err := w.Wait(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("NotOurs", func(t *testing.T) {
		cmd := start(t, "sleep", "30")
		id := identify(t, cmd.Process.Pid)
		id.StartTime++
		if _, err := WatchExit(id); !errors.Is(err, ErrNotRunning) {
			t.Fatalf("WatchExit(reused pid) = %v, want ErrNotRunning", err)
		}
	})
}

func TestSignalGroup(t *testing.T) {
	t.Run("LeaderAndGrandchild", func(t *testing.T) {
		dir := t.TempDir()
		cmd := startGroup(t, "/bin/sh", "-c", "sleep 30 & echo $! > "+dir+"/child; wait")
		id := identify(t, cmd.Process.Pid)
		child := readPID(t, filepath.Join(dir, "child"))
		members, err := GroupMembers(id.PID)
		if err != nil || len(members) != 2 {
			t.Fatalf("GroupMembers = %v, %v; want the shell and its sleep", members, err)
		}
		ok, err := SignalGroup(id, syscall.SIGKILL)
		if err != nil || !ok {
			t.Fatalf("SignalGroup = %v, %v; want signalled", ok, err)
		}
		go func() { _ = cmd.Wait() }() // reap the leader
		testwait.For(t, 5*time.Second, "the group to end", func() bool { gone, _ := GroupGone(id); return gone })
		if s, err := ReadStat(child); err == nil && !s.Exited() {
			t.Fatalf("grandchild %d still runs: %+v", child, s)
		}
		reap(child)
	})
	t.Run("NotOurs", func(t *testing.T) {
		cmd := startGroup(t, "sleep", "30")
		id := identify(t, cmd.Process.Pid)
		id.StartTime++ // as if the pid had been reused since we recorded it
		ok, err := SignalGroup(id, syscall.SIGKILL)
		if err != nil || ok {
			t.Fatalf("SignalGroup(reused pid) = %v, %v; want nothing signalled", ok, err)
		}
		time.Sleep(50 * time.Millisecond)
		if s, err := ReadStat(cmd.Process.Pid); err != nil || s.Exited() {
			t.Fatalf("the process of a reused pid was hurt: %+v, %v", s, err)
		}
	})
	t.Run("LeaderGoneMembersLeft", func(t *testing.T) {
		dir := t.TempDir()
		cmd := startGroup(t, "/bin/sh", "-c", "sleep 30 & echo $! > "+dir+"/child; exit 0")
		id := identify(t, cmd.Process.Pid)
		_ = cmd.Wait() // the leader exits and is reaped; its sleep lives on in the group
		child := readPID(t, filepath.Join(dir, "child"))
		t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL); reap(child) })
		if gone, err := GroupGone(id); err != nil || gone {
			t.Fatalf("GroupGone with a member left = %v, %v; want false", gone, err)
		}
		ok, err := SignalGroup(id, syscall.SIGKILL)
		if err != nil || !ok {
			t.Fatalf("SignalGroup(leaderless group) = %v, %v; want signalled", ok, err)
		}
		testwait.For(t, 5*time.Second, "the member to die", func() bool { gone, _ := GroupGone(id); return gone })
	})
	t.Run("Gone", func(t *testing.T) {
		cmd := startGroup(t, "/bin/sh", "-c", "exit 0")
		id := identify(t, cmd.Process.Pid)
		_ = cmd.Wait()
		ok, err := SignalGroup(id, syscall.SIGTERM)
		if err != nil || ok {
			t.Fatalf("SignalGroup(gone) = %v, %v; want nothing signalled", ok, err)
		}
	})
}

// start runs a command and kills it when the test ends.
func start(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	return startCmd(t, exec.Command(name, args...))
}

// startGroup runs a command as the leader of its own process group and
// kills the group when the test ends.
func startGroup(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return startCmd(t, cmd)
}

func startCmd(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		if cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	})
	return cmd
}

func identify(t *testing.T, pid int) Identity {
	t.Helper()
	id, err := Identify(pid)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	testwait.For(t, 5*time.Second, "the pid file "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}
