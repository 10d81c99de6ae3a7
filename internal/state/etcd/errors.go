package etcd

import (
	"errors"
	"fmt"
	"strings"

	"github.com/infrakit/infrakit/internal/election"
	"github.com/infrakit/infrakit/internal/state"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrFenced: a fenced write was refused because a lease it was fenced
	// with (a leadership, an object's ownership) has ended. The writer
	// must stop acting.
	ErrFenced = errors.New("state write fenced off")
	// ErrLockLost: a write made under a lock taken through this Backend was
	// refused because the lock's lease ended (the holder was paused or cut
	// off from etcd for longer than the lease TTL) and someone else may
	// hold it now.
	ErrLockLost = errors.New("state lock lost")
)

// FencedError is a write refused by one of its fences (Fence: the first
// found fallen). It matches ErrFenced.
type FencedError struct {
	State string
	Fence election.Fence
	// Current is the create revision of the fence key now; 0 when it is gone.
	Current int64
}

func (e *FencedError) Error() string {
	now := "it no longer exists"
	if e.Current != 0 {
		now = fmt.Sprintf("it was recreated at revision %d", e.Current)
	}
	who := "the owner of what it wrote (its owner key"
	if strings.Contains(e.Fence.Key, "/leader/") {
		who = "the leader (its leader key"
	}
	return fmt.Sprintf("state %s: write refused: this process is no longer %s %s was created at revision %d; %s)",
		e.State, who, e.Fence.Key, e.Fence.Revision, now)
}

// Is makes errors.Is(err, ErrFenced) work.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// LockLostError is a write refused because the writer no longer holds the
// state lock it took. It matches ErrLockLost.
type LockLostError struct {
	State string
	// Key is the lock key the writer held.
	Key string
}

func (e *LockLostError) Error() string {
	return fmt.Sprintf("state %s: write refused: the state lock (%s) was lost — its lease expired while this process was paused or cut off from etcd, so another process may hold it now",
		e.State, e.Key)
}

// Is makes errors.Is(err, ErrLockLost) work.
func (e *LockLostError) Is(target error) bool { return target == ErrLockLost }

// ErrOldLayout: the stack's prefix holds the state as one value, the
// layout of infrakit before the state was split per object. It is neither
// used nor overwritten; `infrakit init -migrate-state` moves it
// (MigrateLayout).
var ErrOldLayout = errors.New("state in the one-value layout")

// OldLayoutError is a state found in the one-value layout. It matches
// ErrOldLayout and state.ErrInvalid (it is refused as a state that cannot
// be used is: never overwritten).
type OldLayoutError struct {
	// State is the one-value key.
	State string
}

func (e *OldLayoutError) Error() string {
	return fmt.Sprintf("state %s: holds the whole state as one value, the layout of an older infrakit; refusing to use or overwrite it; "+
		"run \"infrakit init -migrate-state\" to move it to the per-object layout (the old value is kept as a backup)", e.State)
}

// Is makes errors.Is(err, ErrOldLayout) and errors.Is(err,
// state.ErrInvalid) work.
func (e *OldLayoutError) Is(target error) bool {
	return target == ErrOldLayout || target == state.ErrInvalid
}
