package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/infrakit/infrakit/internal/state"
)

// lockHolder is a lock held through a Backend: its key and create revision.
type lockHolder struct {
	key string
	rev int64
}

// owns is the transaction condition "the lock is still held".
func (h *lockHolder) owns() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.rev)
}

// Lock takes the state lock; see state.Store. It is a concurrency.Mutex at
// LockKey() on a Session of its own, whose lease has LeaseTTL and is kept
// alive while the lock is held. The holder's info (JSON) is the value of
// its mutex key, so a waiter that gives up names the holder.
//
// Lease semantics: a holder that dies, or is paused or cut off from etcd
// for longer than LeaseTTL, loses the lock when its lease expires, and the
// next waiter takes it. Such a holder cannot notice in time to stop what it
// is doing, but its writes through this Backend are conditioned on still
// holding the lock and fail with ErrLockLost. unlock revokes the lease (one
// round trip); if etcd cannot be reached then, the lease expires by itself.
func (b *Backend) Lock(ctx context.Context, info state.LockInfo) (func() error, error) {
	info = withDefaults(info)
	start := time.Now()
	// A free lock is taken even when ctx is already done.
	actx, acancel := graceful(ctx)
	defer acancel()
	grant, err := b.client.Grant(actx, ttlSeconds(b.ttl))
	if err != nil {
		return nil, fmt.Errorf("lock %s: grant lease: %w", b.name(), err)
	}
	bg, cancel := context.WithCancel(context.Background())
	sess, err := concurrency.NewSession(b.client, concurrency.WithLease(grant.ID), concurrency.WithContext(bg))
	if err != nil {
		cancel()
		b.revoke(grant.ID)
		return nil, fmt.Errorf("lock %s: session: %w", b.name(), err)
	}
	release := func() error {
		sess.Orphan()
		cancel()
		return b.revoke(grant.ID)
	}

	m := concurrency.NewMutex(sess, b.LockKey())
	err = m.TryLock(actx)
	if errors.Is(err, concurrency.ErrLocked) {
		if ctx.Err() == nil {
			err = m.Lock(ctx)
		}
		if ctx.Err() != nil {
			_ = release()
			return nil, b.lockedError(start, ctx.Err())
		}
	}
	if err != nil {
		_ = release()
		return nil, fmt.Errorf("lock %s: %w", b.name(), err)
	}

	// Say who holds it, on the mutex key itself, while still holding it.
	data, err := json.Marshal(info)
	if err != nil {
		_ = release()
		return nil, fmt.Errorf("lock %s: %w", b.name(), err)
	}
	tr, err := b.client.Txn(actx).If(m.IsOwner()).
		Then(clientv3.OpPut(m.Key(), string(data), clientv3.WithLease(grant.ID)), clientv3.OpGet(m.Key())).
		Commit()
	if err == nil && !tr.Succeeded {
		err = errors.New("lost the lock at once (lease expired)")
	}
	if err != nil {
		_ = release()
		return nil, fmt.Errorf("lock %s: write holder info: %w", b.name(), err)
	}
	h := &lockHolder{key: m.Key(), rev: tr.Responses[1].GetResponseRange().Kvs[0].CreateRevision}
	b.mu.Lock()
	b.holder = h
	b.mu.Unlock()

	var once sync.Once
	var uerr error
	return func() error {
		once.Do(func() {
			b.mu.Lock()
			if b.holder == h {
				b.holder = nil
			}
			b.mu.Unlock()
			if err := release(); err != nil {
				uerr = fmt.Errorf("unlock %s: %w (the lock frees itself within %s)", b.name(), err, b.ttl)
			}
		})
		return uerr
	}, nil
}

// revoke ends a lease, giving up after the lease's TTL (it has expired by
// then anyway). A lease already gone is no error.
func (b *Backend) revoke(id clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(context.Background(), b.ttl)
	defer cancel()
	_, err := b.client.Revoke(ctx, id)
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("revoke lease %x: %w", int64(id), err)
	}
	return nil
}

// lockedError is the error of a lock wait that ended, naming the holder:
// the oldest key under LockKey.
func (b *Backend) lockedError(start time.Time, cause error) error {
	e := &state.LockedError{State: b.name(), Waited: time.Since(start), Cause: cause}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// The holder writes its info right after taking the lock; give a
	// holder caught in between a moment to finish.
	for range 5 {
		resp, err := b.client.Get(ctx, b.LockKey()+"/", clientv3.WithFirstCreate()...)
		if err == nil && len(resp.Kvs) > 0 {
			var h state.LockInfo
			if json.Unmarshal(resp.Kvs[0].Value, &h) == nil && h.PID != 0 {
				e.Holder, e.Known = h, true
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return e
}

// withDefaults fills the zero fields of info from the running process, as
// the local backend does.
func withDefaults(i state.LockInfo) state.LockInfo {
	if i.ID == "" {
		i.ID = state.NewLineage()
	}
	if i.PID == 0 {
		i.PID = os.Getpid()
	}
	if i.Host == "" {
		i.Host, _ = os.Hostname() // best effort: only used in messages
	}
	if i.Since.IsZero() {
		i.Since = time.Now()
	}
	i.Since = i.Since.UTC()
	return i
}

// ttlSeconds is a TTL as etcd takes it: whole seconds, rounded up.
func ttlSeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}
