package ownership

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/election"
)

// ErrOwned: the object is held by another member (or by an earlier
// session of this process whose lease has not expired yet).
var ErrOwned = errors.New("owned by another member")

// ErrNotStanding: the session no longer stands (lost, or its renewal is
// overdue), so it takes nothing.
var ErrNotStanding = errors.New("session no longer stands")

// Acquire takes o for this session: it creates P/owners/<kind>/<name>,
// attached to the session's lease, only if the key does not exist — so an
// object never has two owners. The fence it returns (the key and its
// create revision) must condition every state write made as o's owner. It
// fails with ErrOwned when someone holds o.
func (s *Session) Acquire(ctx context.Context, o Object) (election.Fence, error) {
	if err := o.Valid(); err != nil {
		return election.Fence{}, err
	}
	if !s.Standing() {
		return election.Fence{}, fmt.Errorf("acquire %s: %w: %w", o, ErrNotStanding, s.Err())
	}
	key := s.ownerKey(o)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, s.id, clientv3.WithLease(s.lease.ID()))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return election.Fence{}, fmt.Errorf("acquire %s: %w", o, err)
	}
	if resp.Succeeded {
		return election.Fence{Key: key, Revision: resp.Header.Revision}, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 1 && kvs[0].Lease == int64(s.lease.ID()) {
		// A retried request that had gone through: the key is ours.
		return election.Fence{Key: key, Revision: kvs[0].CreateRevision}, nil
	}
	owner := "?"
	if len(kvs) == 1 {
		owner = string(kvs[0].Value)
	}
	return election.Fence{}, fmt.Errorf("acquire %s: %w (%s)", o, ErrOwned, owner)
}

// Release gives o back: it deletes o's owner key if it still has fence's
// create revision. When it does not (the lease expired, someone else
// holds o now), there is nothing to give back: Release deletes nothing
// and returns nil. Stop acting on o first.
func (s *Session) Release(ctx context.Context, o Object, fence election.Fence) error {
	if key := s.ownerKey(o); fence.Key != key {
		return fmt.Errorf("release %s: fence %s is not its owner key %s", o, fence, key)
	}
	if _, err := s.client.Txn(ctx).If(fence.Cmp()).Then(clientv3.OpDelete(fence.Key)).Commit(); err != nil {
		return fmt.Errorf("release %s: %w", o, err)
	}
	return nil
}

// ErrNotOwned: the object's owner key is gone or belongs to a later
// owner.
var ErrNotOwned = errors.New("no longer owned")

// Verify confirms, right before acting on an object, that this session
// still owns it under fence: that the session stands by this process's
// clock (when its renewal is overdue it is declared lost now, whatever its
// monitor has noticed yet: a process that was frozen must not act on
// belief) and — one round trip — that the owner key still exists with the
// fence's create revision (ErrNotOwned otherwise). An etcd that cannot be
// asked is an error too: do not act.
func (s *Session) Verify(ctx context.Context, fence election.Fence) error {
	if err := s.Err(); err != nil {
		return fmt.Errorf("verify %s: %w", fence, err)
	}
	if !s.Standing() {
		s.lease.Lose(election.ErrRenewalOverdue)
		return fmt.Errorf("verify %s: %w", fence, s.Err())
	}
	resp, err := s.client.Get(ctx, fence.Key)
	if err != nil {
		return fmt.Errorf("verify %s: %w", fence, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != fence.Revision {
		return fmt.Errorf("verify %s: %w", fence, ErrNotOwned)
	}
	return nil
}
