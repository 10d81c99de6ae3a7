// Package proc proves, from what Linux shows in /proc, that a pid still
// names the process infrakit started, and signals process groups only when
// it can.
//
// A pid alone proves nothing: the kernel reuses pids (pid_max is often
// 32768), so a recorded pid may name a stranger's process by the time it is
// read back. A pid together with the process's start time (field 22 of
// /proc/<pid>/stat, clock ticks after boot) and the boot's ID
// (/proc/sys/kernel/random/boot_id) cannot be reused: that triple is an
// Identity.
//
// Process groups: a provider starts every instance as the leader of its own
// group (pgid = pid). The kernel never hands out a number that is still in
// use as a pid or as a pgid, so while the leader exists (even as a zombie)
// or any member of its group does, that group is still the one we made.
// SignalGroup relies on that and on nothing else.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// procRoot is where procfs is mounted.
const procRoot = "/proc"

// Stat is what infrakit reads from /proc/<pid>/stat.
type Stat struct {
	PID   int
	Comm  string
	State byte // R, S, D, T, Z (zombie), X (dead), ...
	PPID  int
	PGRP  int
	// StartTime is field 22: when the process started, in clock ticks after boot.
	StartTime uint64
}

// Exited reports whether the process has ended: a zombie (exited, its parent
// has not reaped it yet) or dead.
func (s Stat) Exited() bool { return s.State == 'Z' || s.State == 'X' }

// ParseStat parses the contents of /proc/<pid>/stat. The command name (field
// 2) is in parentheses and may itself contain spaces and parentheses, so the
// fields after it are found from the last ')'.
func ParseStat(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return Stat{}, fmt.Errorf("stat %q: no (comm)", truncate(b))
	}
	var s Stat
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("stat %q: pid: %w", truncate(b), err)
	}
	s.PID, s.Comm = pid, string(b[open+1:closing])
	// rest[0] is field 3 (state); field n is rest[n-3].
	rest := strings.Fields(string(b[closing+1:]))
	if len(rest) < 22-3+1 {
		return Stat{}, fmt.Errorf("stat %q: %d fields after comm, want at least 20", truncate(b), len(rest))
	}
	if len(rest[0]) != 1 {
		return Stat{}, fmt.Errorf("stat %q: state %q", truncate(b), rest[0])
	}
	s.State = rest[0][0]
	if s.PPID, err = strconv.Atoi(rest[4-3]); err != nil {
		return Stat{}, fmt.Errorf("stat %q: ppid: %w", truncate(b), err)
	}
	if s.PGRP, err = strconv.Atoi(rest[5-3]); err != nil {
		return Stat{}, fmt.Errorf("stat %q: pgrp: %w", truncate(b), err)
	}
	if s.StartTime, err = strconv.ParseUint(rest[22-3], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("stat %q: starttime: %w", truncate(b), err)
	}
	return s, nil
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// ReadStat reads /proc/<pid>/stat. A pid that does not exist gives an error
// wrapping fs.ErrNotExist.
func ReadStat(pid int) (Stat, error) {
	if pid <= 0 {
		return Stat{}, fmt.Errorf("pid %d: %w", pid, fs.ErrNotExist)
	}
	b, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, syscall.ESRCH) {
		// The process went away between open and read.
		err = fmt.Errorf("pid %d: %w", pid, fs.ErrNotExist)
	}
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(b)
}

// bootID is read once: it does not change while this process lives.
var bootID = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile(procRoot + "/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
})

// Identity names one process for as long as the machine runs: start times
// repeat after a reboot, so the boot's ID is part of it.
type Identity struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	BootID    string `json:"boot_id"`
}

func (id Identity) String() string {
	return fmt.Sprintf("pid %d (start time %d)", id.PID, id.StartTime)
}

// Identify reads the Identity of a running pid. Call it while the pid
// cannot be reused: for a child, before it is reaped.
func Identify(pid int) (Identity, error) {
	boot, err := bootID()
	if err != nil {
		return Identity{}, err
	}
	s, err := ReadStat(pid)
	if err != nil {
		return Identity{}, err
	}
	return Identity{PID: pid, StartTime: s.StartTime, BootID: boot}, nil
}

// Status is what became of an identified process.
type Status int

const (
	// Running: the pid names the identified process and it has not exited.
	Running Status = iota
	// Exited: no process has the pid, or the identified one is a zombie.
	Exited
	// Replaced: the pid names another process (reused), or the machine
	// rebooted. The identified process is gone and the pid is not ours.
	Replaced
)

func (s Status) String() string {
	switch s {
	case Running:
		return "running"
	case Exited:
		return "exited"
	case Replaced:
		return "replaced"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Check tells what became of the identified process.
func (id Identity) Check() (Status, error) {
	boot, err := bootID()
	if err != nil {
		return 0, err
	}
	if boot != id.BootID {
		return Replaced, nil
	}
	s, err := ReadStat(id.PID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Exited, nil
	case err != nil:
		return 0, err
	case s.StartTime != id.StartTime:
		return Replaced, nil
	case s.Exited():
		return Exited, nil
	}
	return Running, nil
}

// GroupMembers lists the processes of group pgid that have not exited.
func GroupMembers(pgid int) ([]Stat, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []Stat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process directory
		}
		s, err := ReadStat(pid)
		if err != nil {
			continue // gone meanwhile, or not ours to read
		}
		if s.PGRP == pgid && !s.Exited() {
			out = append(out, s)
		}
	}
	return out, nil
}

// groupOwned reports whether process group id.PID is provably the one the
// identified process leads: its leader is still the identified process
// (running or a zombie), or the leader's pid is free and members remain, which
// keep the number from being reused. A leader pid naming another process
// means the group number may be someone else's: not owned.
func groupOwned(id Identity) (bool, error) {
	st, err := id.Check()
	if err != nil {
		return false, err
	}
	switch st {
	case Replaced:
		return false, nil
	case Running:
		return true, nil
	}
	// Exited: a zombie leader pins the number; a reaped one leaves it
	// pinned only by remaining members.
	if s, err := ReadStat(id.PID); err == nil && s.StartTime == id.StartTime {
		return true, nil
	}
	members, err := GroupMembers(id.PID)
	if err != nil {
		return false, err
	}
	return len(members) > 0, nil
}

// SignalGroup sends sig to the process group the identified process leads,
// and to the process itself (it may have left the group), but only when
// they are provably its (see the package doc). It reports whether it
// signalled anything; a group that is gone, or not provably ours, is not an
// error.
func SignalGroup(id Identity, sig syscall.Signal) (bool, error) {
	owned, err := groupOwned(id)
	if err != nil || !owned {
		return false, err
	}
	signalled := false
	if err := syscall.Kill(-id.PID, sig); err == nil {
		signalled = true
	} else if !errors.Is(err, syscall.ESRCH) {
		return false, fmt.Errorf("signal group %d: %w", id.PID, err)
	}
	// The leader may have moved to a group of its own (setsid); it is still
	// ours while Check says so.
	if st, err := id.Check(); err == nil && st == Running {
		if err := syscall.Kill(id.PID, sig); err == nil {
			signalled = true
		} else if !errors.Is(err, syscall.ESRCH) {
			return signalled, fmt.Errorf("signal %s: %w", id, err)
		}
	}
	return signalled, nil
}

// GroupGone reports whether nothing provably ours is left of the group the
// identified process led: the leader is not running and no member remains
// (or the leader's pid names another process now, in which case the number
// is not ours to look at).
func GroupGone(id Identity) (bool, error) {
	st, err := id.Check()
	if err != nil {
		return false, err
	}
	switch st {
	case Running:
		return false, nil
	case Replaced:
		return true, nil
	}
	members, err := GroupMembers(id.PID)
	if err != nil {
		return false, err
	}
	return len(members) == 0, nil
}
