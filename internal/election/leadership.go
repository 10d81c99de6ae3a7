package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Leadership is one campaign: its lease, and once Campaign returns it, the
// leadership it won. It owns one goroutine (the monitor) and the Session's
// keep-alive; Resign stops both. Always call Resign, lost or not.
type Leadership struct {
	client   *clientv3.Client
	identity string
	ttl      time.Duration // as granted by etcd
	margin   time.Duration
	lease    clientv3.LeaseID
	session  *concurrency.Session

	// cancel ends the lease's renewals and the monitor's watch.
	bg     context.Context
	cancel context.CancelFunc

	fence   Fence         // set once elected, before elected is closed
	elected chan struct{} // closed when the campaign is won
	stop    chan struct{} // closed by Resign
	done    chan struct{} // closed when the monitor has returned

	lostOnce   sync.Once
	lost       chan struct{}
	lostCtx    context.Context // done when lost is closed
	lostCancel context.CancelFunc
	mu         sync.Mutex
	err        error // why leadership ended; guarded by mu
	// renewed is when the last successful renewal was sent (Unix
	// nanoseconds), for Verify: the monitor keeps it.
	renewed atomic.Int64

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
	// Renewal deadlines count from before the grant was asked for: the
	// lease certainly lives until then + TTL.
	start := time.Now()
	grant, err := e.client.Grant(ctx, ttlSeconds(e.ttl))
	if err != nil {
		return nil, fmt.Errorf("election %s: grant lease: %w", e.prefix, err)
	}
	ttl := time.Duration(grant.TTL) * time.Second
	bg, cancel := context.WithCancel(context.Background())
	session, err := concurrency.NewSession(e.client, concurrency.WithLease(grant.ID), concurrency.WithContext(bg))
	if err != nil {
		cancel()
		e.revoke(grant.ID, ttl)
		return nil, fmt.Errorf("election %s: session: %w", e.prefix, err)
	}
	l := &Leadership{
		client:   e.client,
		identity: identity,
		ttl:      ttl,
		margin:   marginFor(ttl, e.margin),
		lease:    grant.ID,
		session:  session,
		bg:       bg,
		cancel:   cancel,
		elected:  make(chan struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		lost:     make(chan struct{}),
	}
	l.lostCtx, l.lostCancel = context.WithCancel(context.Background())
	l.renewed.Store(start.UnixNano())
	go l.monitor(start)

	// The campaign ends early when the lease is lost while waiting: a
	// campaigner whose key expired would otherwise be told it leads.
	cctx, ccancel := context.WithCancel(ctx)
	stopCancel := context.AfterFunc(l.lostCtx, ccancel)
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
		rctx, rcancel := context.WithTimeout(context.Background(), ttl)
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

// monitor renews the lease every TTL/5, declares leadership lost (see the
// package comment) and, once elected, watches the leader key. It returns
// when leadership is lost or Resign closes stop.
func (l *Leadership) monitor(start time.Time) {
	defer close(l.done)
	lastRenew := start
	renew := time.NewTicker(max(l.ttl/5, 50*time.Millisecond))
	defer renew.Stop()
	overdue := time.NewTimer(time.Until(start.Add(l.ttl - l.margin)))
	defer overdue.Stop()
	var keyEvents clientv3.WatchChan
	elected := l.elected
	for {
		select {
		case <-l.stop:
			return
		case <-l.session.Done():
			l.lose(ErrLeaseLost)
			return
		case <-overdue.C:
			l.lose(ErrRenewalOverdue)
			// The lease may still live in etcd for up to Margin; revoking
			// it lets another campaigner lead at once if etcd is reachable.
			l.revokeWithin(l.margin)
			return
		case <-elected:
			elected = nil
			keyEvents = l.client.Watch(l.bg, l.fence.Key, clientv3.WithRev(l.fence.Revision+1))
		case wr, ok := <-keyEvents:
			if ok && wr.Err() == nil {
				if deleted(wr) {
					l.lose(ErrDeposed)
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
				l.lose(ErrDeposed)
				return
			}
			if rev == 0 {
				rev = l.fence.Revision // unreadable: renewals cover that
			}
			keyEvents = l.client.Watch(l.bg, l.fence.Key, clientv3.WithRev(rev+1))
		case <-renew.C:
			sent := time.Now()
			// Bound the renewal by the overdue instant, so the timer is
			// served on time even when etcd does not answer.
			rctx, cancel := context.WithDeadline(l.bg, lastRenew.Add(l.ttl-l.margin))
			_, err := l.client.KeepAliveOnce(rctx, l.lease)
			cancel()
			switch {
			case err == nil:
				lastRenew = sent
				l.renewed.Store(sent.UnixNano())
				overdue.Reset(time.Until(lastRenew.Add(l.ttl - l.margin)))
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				l.lose(ErrLeaseLost)
				return
			}
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
	ctx, cancel := context.WithTimeout(l.bg, l.margin)
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

// lose records why leadership ended and closes Lost, once.
func (l *Leadership) lose(err error) {
	l.lostOnce.Do(func() {
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(l.lost)
		l.lostCancel()
	})
}

// revokeWithin revokes the lease, giving up after d.
func (l *Leadership) revokeWithin(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, _ = l.client.Revoke(ctx, l.lease) // best effort: the lease expires anyway
}

func (e *Election) revoke(id clientv3.LeaseID, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), ttl)
	defer cancel()
	_, _ = e.client.Revoke(ctx, id) // best effort: the lease expires anyway
}

// Identity is the value this process campaigned with.
func (l *Leadership) Identity() string { return l.identity }

// Fence is the leadership's key and create revision: condition every state
// write on it (see package state/etcd, Backend.WriteFenced).
func (l *Leadership) Fence() Fence { return l.fence }

// TTL is the lease's time to live as etcd granted it.
func (l *Leadership) TTL() time.Duration { return l.ttl }

// Margin is how long before the lease would run out Lost is closed when the
// lease cannot be renewed.
func (l *Leadership) Margin() time.Duration { return l.margin }

// Lost is closed when the leadership ends: the lease is gone, renewal is
// overdue (TTL-Margin without a successful renewal), the leader key was
// deleted, or Resign was called. Stop acting as leader the moment it is
// closed; Err says why.
func (l *Leadership) Lost() <-chan struct{} { return l.lost }

// Context is done when Lost is closed: hand it to the work done as leader
// (or derive its contexts from it) so that the work stops the moment the
// leadership ends.
func (l *Leadership) Context() context.Context { return l.lostCtx }

// Standing reports, without asking etcd, whether the leadership still
// stands as far as this process can tell: not lost, and renewed recently
// enough by this process's clock. Unlike Lost it does not wait for the
// monitor, so a process that was frozen past its renewal deadline says
// false from the moment it resumes (what a status page should show).
func (l *Leadership) Standing() bool {
	return l.Err() == nil && time.Since(time.Unix(0, l.renewed.Load())) < l.ttl-l.margin
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
	if since := time.Since(time.Unix(0, l.renewed.Load())); since >= l.ttl-l.margin {
		l.lose(ErrRenewalOverdue)
		return ErrRenewalOverdue
	}
	resp, err := l.client.Get(ctx, l.fence.Key)
	if err != nil {
		return fmt.Errorf("verify leadership %s: %w", l.fence.Key, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.fence.Revision {
		l.lose(ErrDeposed)
		return ErrDeposed
	}
	return l.Err()
}

// Err is why the leadership ended (ErrLeaseLost, ErrRenewalOverdue,
// ErrDeposed, ErrResigned), or nil while it stands.
func (l *Leadership) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Resign ends the leadership at once: it stops the renewals and revokes the
// lease, which deletes the leader key, so another campaigner leads within
// one round trip to etcd (use it on SIGTERM). Stop acting first: once the
// key is gone, another process may act. Resign is safe to call after Lost,
// and more than once (later calls return the first result). If etcd cannot
// be reached before ctx is done, the lease simply expires after its TTL.
func (l *Leadership) Resign(ctx context.Context) error {
	l.resignOnce.Do(func() {
		l.lose(ErrResigned)
		close(l.stop)
		<-l.done
		l.cancel()
		l.session.Orphan() // waits for the Session's keep-alive to end
		_, err := l.client.Revoke(ctx, l.lease)
		if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			l.resignErr = fmt.Errorf("resign %s: revoke lease %x: %w (it expires within %s)", l.fence.Key, int64(l.lease), err, l.ttl)
		}
	})
	return l.resignErr
}
