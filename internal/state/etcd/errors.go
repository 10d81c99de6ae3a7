package etcd

import (
	"errors"
	"fmt"

	"github.com/infrakit/infrakit/internal/election"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrFenced: a fenced write was refused because the leadership it was
	// fenced with has ended. The writer must stop acting.
	ErrFenced = errors.New("state write fenced off")
	// ErrLockLost: a write made under a lock taken through this Backend was
	// refused because the lock's lease ended (the holder was paused or cut
	// off from etcd for longer than the lease TTL) and someone else may
	// hold it now.
	ErrLockLost = errors.New("state lock lost")
)

// FencedError is a write refused by its fence. It matches ErrFenced.
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
	return fmt.Sprintf("state %s: write refused: this process is no longer the leader (its leader key %s was created at revision %d; %s)",
		e.State, e.Fence.Key, e.Fence.Revision, now)
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
