package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/election"
)

// Request bounds. etcd refuses a request over --max-request-bytes (1.5
// MiB by default) and a transaction of more than --max-txn-ops operations
// (128 by default); a write stays well below both, whatever the size of
// the document.
var (
	txnMaxBytes = 900 << 10
	txnMaxOps   = 100
)

const (
	// opOverhead is what an operation costs in a request beyond its key
	// and value (framing, a little slack).
	opOverhead = 32
	// writingTTL is the lease of a multi-request write's marker: a writer
	// that dies mid-write stops holding garbage collection off after it.
	writingTTL = 60
	// sweepEvery: every so many writes, a Backend looks for parts nobody
	// refers to (left by writers that died mid-write) and deletes them.
	sweepEvery = 64
)

// WriteStats is what the last write through a Backend sent to etcd (for
// tests and measurements).
type WriteStats struct {
	// Requests is the number of requests the write made.
	Requests int
	// Puts and Deletes count the keys written and deleted.
	Puts, Deletes int
	// Bytes is the size of the keys and values sent; MaxRequest the
	// largest request's share of it.
	Bytes, MaxRequest int
	// large: the write took more than one transaction to make.
	large bool
}

// LastWrite is what the last successful write through b sent.
func (b *Backend) LastWrite() WriteStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastWrite
}

// count adds requests (and bytes) to the running write's statistics.
func (b *Backend) count(requests, bytes int) {
	b.mu.Lock()
	b.stats.Requests += requests
	b.stats.Bytes += bytes
	b.stats.MaxRequest = max(b.stats.MaxRequest, bytes)
	b.mu.Unlock()
}

// conds are the conditions of a commit beyond the head's revision.
type conds struct {
	holder *lockHolder
	fences []election.Fence
	// legacyRev, when set, is the mod revision the one-value state must
	// have for a write where no head is (MigrateLayout); otherwise such a
	// write needs the one-value state absent.
	legacyRev int64
}

// failure is why a commit's transaction did not succeed.
type failure struct {
	head   *headKV // the head now (nil: none)
	legacy bool    // a one-value state is stored
	err    error   // the lock was lost or a fence fell
}

type headKV struct {
	value []byte
	rev   int64
}

// commit stores e over the tree whose head has mod revision rev (0:
// absent, and then no one-value state either), deleting the parts of base
// that e no longer refers to. It returns the revision of the new head, or
// the failure (nil error) when a condition did not hold. When e fits one
// transaction it is one; otherwise the new parts go first, in as many
// requests as they need, under a marker that holds off garbage collection,
// and one small transaction swaps the head.
func (b *Backend) commit(ctx context.Context, k keys, e *encoded, base map[string]bool, rev int64, c conds) (int64, *failure, error) {
	var dels []string
	for key := range base {
		if !e.refs[key] {
			dels = append(dels, key)
		}
	}
	size, ops := len(k.head())+len(e.head)+opOverhead, 1+len(dels)+len(e.parts)
	for _, p := range e.parts {
		size += len(p.key) + len(p.value) + opOverhead
	}
	for _, d := range dels {
		size += len(d) + opOverhead
	}
	if ops <= txnMaxOps && size <= txnMaxBytes {
		then := make([]clientv3.Op, 0, ops)
		for _, p := range e.parts {
			then = append(then, clientv3.OpPut(p.key, string(p.value)))
		}
		then = append(then, clientv3.OpPut(k.head(), string(e.head)))
		for _, d := range dels {
			then = append(then, clientv3.OpDelete(d))
		}
		b.countWrite(len(e.parts)+1, len(dels))
		return b.swap(ctx, k, rev, c, nil, then, size)
	}
	return b.commitLarge(ctx, k, e, dels, rev, c)
}

func (b *Backend) countWrite(puts, dels int) {
	b.mu.Lock()
	b.stats.Puts += puts
	b.stats.Deletes += dels
	b.mu.Unlock()
}

// swap is the transaction that makes a write visible: then, if the head
// still has revision rev and the conditions hold.
func (b *Backend) swap(ctx context.Context, k keys, rev int64, c conds, extra []clientv3.Cmp, then []clientv3.Op, size int) (int64, *failure, error) {
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(k.head()), "=", rev)}
	orElse := []clientv3.Op{clientv3.OpGet(k.head()), clientv3.OpGet(b.LegacyKey(), clientv3.WithKeysOnly())}
	if rev == 0 && k == b.live() {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(b.LegacyKey()), "=", c.legacyRev))
	}
	if c.holder != nil {
		cmps = append(cmps, c.holder.owns())
		orElse = append(orElse, clientv3.OpGet(c.holder.key))
	}
	for _, f := range c.fences {
		cmps = append(cmps, f.Cmp())
		orElse = append(orElse, clientv3.OpGet(f.Key))
	}
	cmps = append(cmps, extra...)
	if err := b.interrupted(); err != nil {
		return 0, nil, err
	}
	resp, err := b.client.Txn(ctx).If(cmps...).Then(then...).Else(orElse...).Commit()
	b.count(1, size)
	if err != nil {
		return 0, nil, b.requestError(err, size)
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil, nil
	}
	f := &failure{legacy: len(resp.Responses[1].GetResponseRange().Kvs) > 0}
	if kv := first(resp.Responses[0].GetResponseRange().Kvs); kv != nil {
		f.head = &headKV{value: kv.Value, rev: kv.ModRevision}
	}
	// Which condition failed? The lock and the fences first: a deposed
	// writer must hear that, not a serial conflict it caused.
	i := 2
	if c.holder != nil {
		if kv := first(resp.Responses[i].GetResponseRange().Kvs); kv == nil || kv.CreateRevision != c.holder.rev {
			f.err = &LockLostError{State: b.name(), Key: c.holder.key}
			return 0, f, nil
		}
		i++
	}
	for _, fence := range c.fences {
		var now int64
		if kv := first(resp.Responses[i].GetResponseRange().Kvs); kv != nil {
			now = kv.CreateRevision
		}
		i++
		if now != fence.Revision {
			f.err = &FencedError{State: b.name(), Fence: fence, Current: now}
			return 0, f, nil
		}
	}
	return 0, f, nil
}

// commitLarge is commit in several requests: a marker on a lease of its
// own, the new parts in batches (each conditioned on the marker, so
// nothing is written once a sweep may have run), then the swap, which also
// deletes the marker; deletions that do not fit the swap are collected
// after it. A crash at any point leaves the old head and its parts whole.
func (b *Backend) commitLarge(ctx context.Context, k keys, e *encoded, dels []string, rev int64, c conds) (int64, *failure, error) {
	b.mu.Lock()
	b.stats.large = true
	b.mu.Unlock()
	if err := b.interrupted(); err != nil {
		return 0, nil, err
	}
	lease, err := b.client.Grant(ctx, writingTTL)
	b.count(1, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("write state %s: grant a lease: %w", b.name(), err)
	}
	defer b.revoke(lease.ID)
	marker := fmt.Sprintf("%s%x", k.writing(), int64(lease.ID))
	if err := b.interrupted(); err != nil {
		return 0, nil, err
	}
	mr, err := b.client.Put(ctx, marker, "", clientv3.WithLease(lease.ID))
	b.count(1, len(marker)+opOverhead)
	if err != nil {
		return 0, nil, fmt.Errorf("write state %s: %w", b.name(), err)
	}
	held := clientv3.Compare(clientv3.CreateRevision(marker), "=", mr.Header.Revision)
	for batch := range batches(e.parts) {
		then := make([]clientv3.Op, len(batch))
		size := 0
		for i, p := range batch {
			then[i] = clientv3.OpPut(p.key, string(p.value))
			size += len(p.key) + len(p.value) + opOverhead
		}
		if err := b.interrupted(); err != nil {
			return 0, nil, err
		}
		resp, err := b.client.Txn(ctx).If(held).Then(then...).Commit()
		b.count(1, size)
		b.countWrite(len(batch), 0)
		if err != nil {
			return 0, nil, b.requestError(err, size)
		}
		if !resp.Succeeded {
			return 0, nil, fmt.Errorf("write state %s: the write took longer than its marker's lease (%ds)", b.name(), writingTTL)
		}
		if _, err := b.client.KeepAliveOnce(ctx, lease.ID); err != nil {
			return 0, nil, fmt.Errorf("write state %s: %w", b.name(), err)
		}
	}
	then := []clientv3.Op{clientv3.OpPut(k.head(), string(e.head)), clientv3.OpDelete(marker)}
	size := len(k.head()) + len(e.head) + len(marker) + 2*opOverhead
	n := 0
	for _, d := range dels {
		if len(then) >= txnMaxOps || size+len(d)+opOverhead > txnMaxBytes {
			break
		}
		then = append(then, clientv3.OpDelete(d))
		size += len(d) + opOverhead
		n++
	}
	b.countWrite(1, n)
	newRev, f, err := b.swap(ctx, k, rev, c, []clientv3.Cmp{held}, then, size)
	if err == nil && f == nil && n < len(dels) {
		b.collect(ctx, k, newRev, dels[n:])
	}
	if f != nil && f.err == nil && (f.head == nil || f.head.rev == rev) && !f.legacy {
		// Only the marker can have failed.
		return 0, nil, fmt.Errorf("write state %s: the write took longer than its marker's lease (%ds)", b.name(), writingTTL)
	}
	return newRev, f, err
}

// batches splits parts into requests within the bounds.
func batches(parts []put) func(func([]put) bool) {
	return func(yield func([]put) bool) {
		start, size := 0, 0
		for i, p := range parts {
			s := len(p.key) + len(p.value) + opOverhead
			if i > start && (i-start >= txnMaxOps || size+s > txnMaxBytes) {
				if !yield(parts[start:i]) {
					return
				}
				start, size = i, 0
			}
			size += s
		}
		if start < len(parts) {
			yield(parts[start:])
		}
	}
}

// collect deletes keys, parts nobody refers to, in transactions each
// conditioned on the head still having revision rev and on no write being
// under way (no marker): a writer's new parts are either written in its
// swap itself or under its marker, so collect never deletes a part a head
// will refer to. It is best effort: what it leaves, a later sweep takes.
func (b *Backend) collect(ctx context.Context, k keys, rev int64, keys []string) {
	idle := clientv3.Compare(clientv3.CreateRevision(k.writing()), "=", 0).WithPrefix()
	same := clientv3.Compare(clientv3.ModRevision(k.head()), "=", rev)
	for len(keys) > 0 {
		n := min(len(keys), txnMaxOps)
		ops := make([]clientv3.Op, n)
		size := 0
		for i, key := range keys[:n] {
			ops[i] = clientv3.OpDelete(key)
			size += len(key) + opOverhead
		}
		if b.interrupted() != nil {
			return
		}
		resp, err := b.client.Txn(ctx).If(same, idle).Then(ops...).Commit()
		b.count(1, size)
		if err != nil || !resp.Succeeded {
			return
		}
		b.countWrite(0, n)
		keys = keys[n:]
	}
}

// sweep deletes the parts under k that the head does not refer to: what
// writers that died mid-write left. It needs to know the head's parts, so
// it runs only when the head is the one this Backend last read or wrote
// (or there is none).
func (b *Backend) sweep(ctx context.Context, k keys, known map[string]bool, knownRev int64) {
	resp, err := b.client.Txn(ctx).Then(
		clientv3.OpGet(k.head(), clientv3.WithKeysOnly()),
		clientv3.OpGet(k.root+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	b.count(1, 0)
	if err != nil {
		return
	}
	var rev int64
	if kv := first(resp.Responses[0].GetResponseRange().Kvs); kv != nil {
		rev = kv.ModRevision
	}
	if rev != knownRev {
		return
	}
	var garbage []string
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		key := string(kv.Key)
		switch kindOf(key[len(b.prefix):]) {
		case kindMeta, kindGroup, kindChunk, kindIngress, kindEnrollment:
			if !known[key] {
				garbage = append(garbage, key)
			}
		}
	}
	b.collect(ctx, k, rev, garbage)
}

// requestError is the error of a write's request of size bytes.
func (b *Backend) requestError(err error, size int) error {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return fmt.Errorf("write state %s: a request of %d bytes is more than the etcd server accepts (one part of the state is that large; raise its --max-request-bytes): %w", b.name(), size, err)
	}
	return fmt.Errorf("write state %s: %w", b.name(), err)
}

// interrupted is the test hook that stops a write before a request, as a
// crash there would.
func (b *Backend) interrupted() error {
	if b.interrupt == nil {
		return nil
	}
	return b.interrupt()
}
