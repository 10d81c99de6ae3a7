package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Leadership is one campaign: its lease, and once Campaign returns it, the
// leadership it won. It owns one goroutine (the monitor, which watches the
// leader key) and its Lease; Resign stops both. Always call Resign, lost
// or not.
type Leadership struct {
	client   *clientv3.Client
	identity string
	keeper   *Lease
	lease    clientv3.LeaseID // keeper.ID()

	fence   Fence         // set once elected, before elected is closed
	elected chan struct{} // closed when the campaign is won
	stop    chan struct{} // closed by Resign
	done    chan struct{} // closed when the monitor has returned

	resignOnce sync.Once
	resignErr  error
}

// Campaign waits until this process leads the election, then returns its
// Leadership. identity is what Leader and Observe show (a host name and
// address, say). ctx bounds the wait only: once Campaign has returned, the
// Leadership lasts until Lost or Resign.
//
// Campaign fails when ctx is done first, when etcd cannot be reached, and
// when the campaign's own lease is lost while waiting (ErrLeaseLost or
// ErrRenewalOverdue: the caller campaigns again).
func (e *Election) Campaign(ctx context.Context, identity string) (*Leadership, error) {
	keeper, err := GrantLease(ctx, e.client, e.ttl, e.margin)
	if err != nil {
		return nil, fmt.Errorf("election %s: %w", e.prefix, err)
	}
	l := &Leadership{
		client:   e.client,
		identity: identity,
		keeper:   keeper,
		lease:    keeper.ID(),
		elected:  make(chan struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go l.monitor()

	// The campaign ends early when the lease is lost while waiting: a
	// campaigner whose key expired would otherwise be told it leads.
	cctx, ccancel := context.WithCancel(ctx)
	stopCancel := context.AfterFunc(keeper.Context(), ccancel)
	key, rev, err := l.campaign(cctx, e.prefix, identity)
	stopCancel()
	ccancel()
	if err == nil {
		err = l.confirm(ctx, key, rev)
	}
	if err != nil {
		if lerr := l.Err(); lerr != nil {
			err = lerr
		}
		// Bounded: etcd may be what failed; the lease expires anyway.
		rctx, rcancel := context.WithTimeout(context.Background(), keeper.TTL())
		_ = l.Resign(rctx)
		rcancel()
		return nil, fmt.Errorf("election %s: campaign: %w", e.prefix, err)
	}
	return l, nil
}

// campaign puts the campaign's key, <prefix>/<lease> (the key
// concurrency.Election uses) holding identity, and waits until every key
// of the election created before it is gone: it then leads. It returns the
// key and its create revision.
//
// It is concurrency.Election.Campaign without its clean-up: that one, when
// its wait is cancelled, deletes the key asking etcd with no deadline at
// all, so that a campaign cancelled while etcd is unreachable never
// returns. Here the caller cleans up (Resign, which revokes the lease, and
// is bounded).
func (l *Leadership) campaign(ctx context.Context, prefix, identity string) (string, int64, error) {
	key := fmt.Sprintf("%s/%x", prefix, l.lease)
	resp, err := l.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, identity, clientv3.WithLease(l.lease))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return "", 0, err
	}
	rev := resp.Header.Revision
	if !resp.Succeeded {
		// A retried request that had gone through: the key is ours.
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return "", 0, ErrLeaseLost
		}
		rev = kvs[0].CreateRevision
	}
	before := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))
	for {
		g, err := l.client.Get(ctx, prefix+"/", before...)
		if err != nil {
			return "", 0, err
		}
		if len(g.Kvs) == 0 {
			return key, rev, nil
		}
		if err := waitDelete(ctx, l.client, string(g.Kvs[0].Key), g.Header.Revision); err != nil {
			return "", 0, err
		}
	}
}

// waitDelete waits until key is deleted, watching from rev on.
func waitDelete(ctx context.Context, client *clientv3.Client, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var last clientv3.WatchResponse
	for wr := range client.Watch(wctx, key, clientv3.WithRev(rev)) {
		if deleted(wr) {
			return nil
		}
		last = wr
	}
	if err := last.Err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("the watch of the leader key before this one ended")
}

// confirm checks that the key the campaign won with still exists, then
// publishes the fence and starts watching the key.
func (l *Leadership) confirm(ctx context.Context, key string, rev int64) error {
	resp, err := l.client.Get(ctx, key)
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != rev {
		return ErrLeaseLost
	}
	l.fence = Fence{Key: key, Revision: rev}
	close(l.elected)
	return nil
}

// monitor watches the leader key once elected, and deposes the leadership
// when the key is deleted; the Lease renews and declares the lease lost.
// It returns when leadership is lost or Resign closes stop.
func (l *Leadership) monitor() {
	defer close(l.done)
	var keyEvents clientv3.WatchChan
	elected := l.elected
	for {
		select {
		case <-l.stop:
			return
		case <-l.keeper.Lost():
			return
		case <-elected:
			elected = nil
			keyEvents = l.client.Watch(l.keeper.bg, l.fence.Key, clientv3.WithRev(l.fence.Revision+1))
		case wr, ok := <-keyEvents:
			if ok && wr.Err() == nil {
				if deleted(wr) {
					l.keeper.lose(ErrDeposed)
					return
				}
				continue
			}
			if !ok {
				// Only a closed client ends a watch early; renewals
				// fail then too, and the overdue timer ends leadership.
				keyEvents = nil
				continue
			}
			// The watch failed (compaction): read the key, and watch
			// again from that read on.
			rev, gone := l.readKey()
			if gone {
				l.keeper.lose(ErrDeposed)
				return
			}
			if rev == 0 {
				rev = l.fence.Revision // unreadable: renewals cover that
			}
			keyEvents = l.client.Watch(l.keeper.bg, l.fence.Key, clientv3.WithRev(rev+1))
		}
	}
}

// deleted reports whether wr deletes the key.
func deleted(wr clientv3.WatchResponse) bool {
	for _, ev := range wr.Events {
		if ev.Type == mvccpb.DELETE {
			return true
		}
	}
	return false
}

// readKey reads the leader key: gone reports that it no longer holds this
// leadership; rev is the revision read at, 0 when etcd did not answer.
func (l *Leadership) readKey() (rev int64, gone bool) {
	ctx, cancel := context.WithTimeout(l.keeper.bg, l.keeper.margin)
	defer cancel()
	resp, err := l.client.Get(ctx, l.fence.Key)
	if err != nil {
		return 0, false // the renewal deadline covers an unreachable etcd
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.fence.Revision {
		return resp.Header.Revision, true
	}
	return resp.Header.Revision, false
}

// Identity is the value this process campaigned with.
func (l *Leadership) Identity() string { return l.identity }

// Fence is the leadership's key and create revision: condition every state
// write on it (see package state/etcd, Backend.WriteFenced).
func (l *Leadership) Fence() Fence { return l.fence }

// TTL is the lease's time to live as etcd granted it.
func (l *Leadership) TTL() time.Duration { return l.keeper.TTL() }

// Margin is how long before the lease would run out Lost is closed when the
// lease cannot be renewed.
func (l *Leadership) Margin() time.Duration { return l.keeper.Margin() }

// Lost is closed when the leadership ends: the lease is gone, renewal is
// overdue (TTL-Margin without a successful renewal), the leader key was
// deleted, or Resign was called. Stop acting as leader the moment it is
// closed; Err says why.
func (l *Leadership) Lost() <-chan struct{} { return l.keeper.Lost() }

// Context is done when Lost is closed: hand it to the work done as leader
// (or derive its contexts from it) so that the work stops the moment the
// leadership ends.
func (l *Leadership) Context() context.Context { return l.keeper.Context() }

// Standing reports, without asking etcd, whether the leadership still
// stands as far as this process can tell: not lost, and renewed recently
// enough by this process's clock. Unlike Lost it does not wait for the
// monitor, so a process that was frozen past its renewal deadline says
// false from the moment it resumes (what a status page should show).
func (l *Leadership) Standing() bool {
	return l.keeper.Standing()
}

// Verify confirms, right before acting, that the leadership still stands:
// that it was not lost, that its renewal is not overdue by this process's
// clock, and — one round trip — that its key still exists in etcd with its
// create revision. A process that was frozen (SIGSTOP, a long GC pause, a
// suspended VM) has its monitor's timers fire in no particular order with
// the rest of it when it resumes; Verify does not depend on them. When the
// leadership is found gone, it is declared lost (Lost is closed) and the
// error says why; an etcd that cannot be asked is an error too, and the
// caller must not act.
func (l *Leadership) Verify(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	if l.keeper.overdue() {
		l.keeper.lose(ErrRenewalOverdue)
		return ErrRenewalOverdue
	}
	resp, err := l.client.Get(ctx, l.fence.Key)
	if err != nil {
		return fmt.Errorf("verify leadership %s: %w", l.fence.Key, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.fence.Revision {
		l.keeper.lose(ErrDeposed)
		return ErrDeposed
	}
	return l.Err()
}

// Err is why the leadership ended (ErrLeaseLost, ErrRenewalOverdue,
// ErrDeposed, ErrResigned), or nil while it stands.
func (l *Leadership) Err() error { return l.keeper.Err() }

// Resign ends the leadership at once: it stops the renewals and revokes the
// lease, which deletes the leader key, so another campaigner leads within
// one round trip to etcd (use it on SIGTERM). Stop acting first: once the
// key is gone, another process may act. Resign is safe to call after Lost,
// and more than once (later calls return the first result). If etcd cannot
// be reached before ctx is done, the lease simply expires after its TTL.
func (l *Leadership) Resign(ctx context.Context) error {
	l.resignOnce.Do(func() {
		l.keeper.lose(ErrResigned)
		close(l.stop)
		<-l.done
		if err := l.keeper.Revoke(ctx); err != nil {
			l.resignErr = fmt.Errorf("resign %s: %w", l.fence.Key, err)
		}
	})
	return l.resignErr
}
