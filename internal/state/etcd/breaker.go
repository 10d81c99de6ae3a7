package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/state"
)

var _ state.LockBreaker = (*Backend)(nil)

// LockStatus names the lock's holder: the oldest key under LockKey (the
// concurrency.Mutex queue's head), with its lease's remaining TTL. A holder
// that died keeps the lock until its lease expires.
func (b *Backend) LockStatus(ctx context.Context) (state.LockStatus, error) {
	resp, err := b.client.Get(ctx, b.LockKey()+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return state.LockStatus{}, fmt.Errorf("lock %s: %w", b.name(), err)
	}
	if len(resp.Kvs) == 0 {
		return state.LockStatus{}, nil
	}
	kv := resp.Kvs[0]
	st := state.LockStatus{Held: true}
	var h state.LockInfo
	if json.Unmarshal(kv.Value, &h) == nil && h.PID != 0 {
		st.Holder, st.Known = h, true
	}
	if kv.Lease != 0 {
		ttl, err := b.client.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err == nil && ttl.TTL > 0 {
			st.Expires = time.Duration(ttl.TTL) * time.Second
		}
	}
	return st, nil
}

// ForceUnlock breaks acquisition id: it revokes the lease of the lock key
// whose holder info has that ID, which deletes the key, so the next waiter
// takes the lock at once; the old holder's lock-conditioned writes then
// fail with ErrLockLost. A key without a lease is deleted.
func (b *Backend) ForceUnlock(ctx context.Context, id string) (state.ForceUnlockResult, error) {
	resp, err := b.client.Get(ctx, b.LockKey()+"/", clientv3.WithPrefix())
	if err != nil {
		return state.ForceUnlockResult{}, fmt.Errorf("lock %s: %w", b.name(), err)
	}
	for _, kv := range resp.Kvs {
		var h state.LockInfo
		if json.Unmarshal(kv.Value, &h) != nil || h.ID != id {
			continue
		}
		if kv.Lease != 0 {
			_, err = b.client.Revoke(ctx, clientv3.LeaseID(kv.Lease))
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				err = nil // expired meanwhile: as good
			}
		} else {
			_, err = b.client.Delete(ctx, string(kv.Key))
		}
		if err != nil {
			return state.ForceUnlockResult{}, fmt.Errorf("lock %s: break lock %s: %w", b.name(), id, err)
		}
		return state.ForceUnlockResult{WasHeld: true}, nil
	}
	return state.ForceUnlockResult{}, fmt.Errorf("lock %s: no lock %s is held: %w", b.name(), id, state.ErrNoSuchLock)
}
