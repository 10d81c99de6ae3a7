package state

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/infrakit/infrakit/sdk/filelock"
)

// LockBreaker is a Store whose lock can be looked at and broken, for
// `infrakit force-unlock`. Both backends implement it.
type LockBreaker interface {
	// LockStatus says who holds the lock, or held it last.
	LockStatus(ctx context.Context) (LockStatus, error)
	// ForceUnlock ends the acquisition id (LockInfo.ID). It fails with an
	// error matching ErrNoSuchLock when id is not the lock's, and with one
	// matching ErrUnbreakable when the backend cannot take the lock from
	// a living holder.
	ForceUnlock(ctx context.Context, id string) (ForceUnlockResult, error)
}

// LockStatus is what a backend knows of its lock.
type LockStatus struct {
	// Held is set while someone holds the lock.
	Held bool
	// Holder is the info its holder recorded; Known is false when there is
	// none. A lock that is not held may still have the record of a holder
	// that died without releasing it (the local file keeps it; see Local).
	Holder LockInfo
	Known  bool
	// Expires is, for a lock with a lease (etcd), how long until it frees
	// itself if its holder is gone (zero: no lease).
	Expires time.Duration
}

// ForceUnlockResult says what ForceUnlock did.
type ForceUnlockResult struct {
	// WasHeld is set when the lock was held and is now broken; when it is
	// clear the lock was already free and only a stale record was cleared.
	WasHeld bool
}

// Sentinel errors of lock breaking.
var (
	// ErrNoSuchLock: the ID named is not the lock's (or nothing is locked).
	ErrNoSuchLock = errors.New("no such lock")
	// ErrUnbreakable: the lock is held and this backend cannot take it
	// from its holder (a flock ends only with its holder).
	ErrUnbreakable = errors.New("lock cannot be broken")
)

// UnlockRequest is what force-unlock decides on: the backend's status, the
// ID the user named, and what the caller found out about the holder.
type UnlockRequest struct {
	Status LockStatus
	ID     string
	// ThisHost is the host force-unlock runs on; HolderAlive is set when
	// the holder's host is this one and a process with its PID runs here.
	ThisHost    string
	HolderAlive bool
	// Force overrides the refusal to break a living holder's lock.
	Force bool
}

// CheckForceUnlock is the decision of force-unlock, a pure function: nil
// when the lock named may be broken (or its stale record cleared), else why
// not. A holder running on this host is never broken without Force: it may
// be in the middle of provider calls, and two writers would race.
func CheckForceUnlock(r UnlockRequest) error {
	st := r.Status
	switch {
	case !st.Known && !st.Held:
		return fmt.Errorf("the state is not locked, so there is no lock %s to unlock (a local lock whose holder died ended with its process): %w", r.ID, ErrNoSuchLock)
	case !st.Known:
		return fmt.Errorf("the state lock is held by a holder that recorded no info (it may be taking the lock right now); try again: %w", ErrNoSuchLock)
	case st.Holder.ID != r.ID:
		return fmt.Errorf("the state lock's ID is %s, not %s (%s): %w", st.Holder.ID, r.ID, DescribeHolder(st.Holder), ErrNoSuchLock)
	case st.Held && r.HolderAlive && !r.Force:
		return fmt.Errorf("the lock's holder, pid %d, is running on this host (%s): stop it, or wait for it; -force breaks the lock anyway",
			st.Holder.PID, r.ThisHost)
	}
	return nil
}

// DescribeHolder is a lock holder for messages.
func DescribeHolder(h LockInfo) string {
	return fmt.Sprintf("%q, pid %d on host %s, since %s", h.Operation, h.PID, h.Host, h.Since.UTC().Format(time.RFC3339))
}

var _ LockBreaker = (*Local)(nil)

// LockStatus looks at the lock without taking it for long: a flock that can
// be taken is free (its last holder's record may remain in the file, when
// that holder died); one that cannot is held by a living process, since the
// kernel drops a flock with the last descriptor of its holder.
func (l *Local) LockStatus(ctx context.Context) (LockStatus, error) {
	if err := ctx.Err(); err != nil {
		return LockStatus{}, err
	}
	f, err := l.tryAcquire()
	if err != nil {
		return LockStatus{}, err
	}
	info, known := readInfo(l.lockPath)
	if f == nil {
		return LockStatus{Held: true, Holder: info, Known: known}, nil
	}
	// Let go without clearing the record (release would): this only looks.
	if err := errors.Join(filelock.Release(f), f.Close()); err != nil {
		return LockStatus{}, fmt.Errorf("lock %s: %w", l.lockPath, err)
	}
	return LockStatus{Holder: info, Known: known}, nil
}

// ForceUnlock clears the record of lock id left by a holder that died. A
// held flock cannot be broken from outside its holder: that is an error
// matching ErrUnbreakable, whatever the caller decided. The record is
// cleared under the lock, so a new holder's record is never lost.
func (l *Local) ForceUnlock(ctx context.Context, id string) (ForceUnlockResult, error) {
	if err := ctx.Err(); err != nil {
		return ForceUnlockResult{}, err
	}
	f, err := l.tryAcquire()
	if err != nil {
		return ForceUnlockResult{}, err
	}
	if f == nil {
		info, known := readInfo(l.lockPath)
		who := "a running process"
		if known {
			who = DescribeHolder(info)
		}
		return ForceUnlockResult{}, fmt.Errorf("the state lock %s is a flock held by %s; a flock ends only with its holder's process, so stop that process: %w",
			l.lockPath, who, ErrUnbreakable)
	}
	info, known := readInfo(l.lockPath)
	if !known || info.ID != id {
		ferr := errors.Join(filelock.Release(f), f.Close())
		if ferr != nil {
			return ForceUnlockResult{}, fmt.Errorf("lock %s: %w", l.lockPath, ferr)
		}
		return ForceUnlockResult{}, fmt.Errorf("lock %s records no lock %s: %w", l.lockPath, id, ErrNoSuchLock)
	}
	// release clears the record and drops our flock.
	if err := release(f); err != nil {
		return ForceUnlockResult{}, err
	}
	return ForceUnlockResult{}, nil
}

// Alive reports whether a process with pid runs on this host (signal 0
// reaches it, or it exists but belongs to another user).
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
