package etcd

import (
	"bytes"
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/state"
)

// MigrateLayout moves a state stored as one value at LegacyKey (the layout
// of infrakit before the split) into the split layout, under b's lock:
//   - nothing at LegacyKey: nothing to move (Moved false);
//   - the one value is decoded and checked as Read checks a state (a value
//     it refuses is not moved);
//   - it is stored in the split layout unchanged (same lineage and serial)
//     and read back and compared; when the split layout already holds this
//     state at that serial or later (an interrupted migration, and maybe
//     writes since) it is kept (Resumed); another state there is refused;
//   - the one value is moved to MigratedKey, kept as a backup, in one
//     transaction conditioned on it being unchanged.
//
// Run again, it does nothing: it is what `init -migrate-state` does when
// the backend did not change.
func MigrateLayout(ctx context.Context, b *Backend) (Migration, error) {
	unlock, err := b.Lock(ctx, state.LockInfo{Operation: "init -migrate-state"})
	if err != nil {
		return Migration{}, fmt.Errorf("lock the state: %w", err)
	}
	defer unlock()
	old, kv, err := b.legacyDoc(ctx)
	if err != nil || kv == nil {
		return Migration{}, err
	}
	m := Migration{Moved: true, Lineage: old.Lineage, Serial: old.Serial, Backup: b.MigratedKey() + " in etcd"}
	cur, err := b.load(ctx, b.live(), false)
	if err != nil {
		return Migration{}, fmt.Errorf("read the split state: %w", err)
	}
	switch {
	case cur.rev == 0:
		if err := b.createOver(ctx, old, kv.ModRevision); err != nil {
			return Migration{}, fmt.Errorf("write the split state: %w", err)
		}
		if err := b.verify(ctx, old); err != nil {
			return Migration{}, err
		}
	case cur.doc.Lineage == old.Lineage && cur.doc.Serial >= old.Serial:
		m.Resumed = true
		m.Serial = cur.doc.Serial
	default:
		return Migration{}, fmt.Errorf("%s holds a state (lineage %s, serial %d) and %s another (lineage %s, serial %d); refusing to choose — move one away: %w",
			b.StateKey(), cur.doc.Lineage, cur.doc.Serial, b.LegacyKey(), old.Lineage, old.Serial, state.ErrLineage)
	}
	if err := b.moveLegacyAside(ctx, kv); err != nil {
		return Migration{}, fmt.Errorf("the state is in the split layout; %w", err)
	}
	return m, nil
}

// legacyDoc reads the one-value state (kv nil: there is none), checked as
// a Read checks a state.
func (b *Backend) legacyDoc(ctx context.Context) (*state.Document, *mvccpb.KeyValue, error) {
	resp, err := b.client.Get(ctx, b.LegacyKey())
	if err != nil {
		return nil, nil, fmt.Errorf("read the state %s: %w", b.LegacyKey(), err)
	}
	kv := first(resp.Kvs)
	if kv == nil {
		return nil, nil, nil
	}
	doc, err := state.Decode(b.LegacyKey()+" in etcd", kv.Value)
	if err != nil {
		return nil, nil, fmt.Errorf("the one-value state cannot be moved: %w", err)
	}
	return doc, kv, nil
}

// moveLegacyAside moves the one-value state kv to MigratedKey, in one
// transaction conditioned on it being unchanged.
func (b *Backend) moveLegacyAside(ctx context.Context, kv *mvccpb.KeyValue) error {
	tr, err := b.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(b.LegacyKey()), "=", kv.ModRevision)).
		Then(clientv3.OpPut(b.MigratedKey(), string(kv.Value)), clientv3.OpDelete(b.LegacyKey())).
		Commit()
	if err == nil && !tr.Succeeded {
		err = fmt.Errorf("it changed during the migration")
	}
	if err != nil {
		return fmt.Errorf("keeping the one value as a backup in %s failed: %w", b.MigratedKey(), err)
	}
	return nil
}

// createOver is Create where the one-value state still is, at revision
// legacyRev.
func (b *Backend) createOver(ctx context.Context, doc *state.Document, legacyRev int64) error {
	b.mu.Lock()
	b.stats = WriteStats{}
	c := conds{holder: b.holder, legacyRev: legacyRev}
	b.mu.Unlock()
	e, err := encode(b.live(), doc, nil, func(string) []state.Instance { return nil })
	if err != nil {
		return err
	}
	rev, f, err := b.commit(ctx, b.live(), e, nil, 0, c)
	if err != nil {
		return err
	}
	if f != nil {
		if f.err != nil {
			return f.err
		}
		return fmt.Errorf("%s changed during the migration", b.name())
	}
	b.written(ctx, e, rev, header(doc))
	return nil
}

// verify reads the split state back and compares it with want.
func (b *Backend) verify(ctx context.Context, want *state.Document) error {
	back, err := b.load(ctx, b.live(), false)
	if err != nil {
		return fmt.Errorf("verify the split state: %w", err)
	}
	got, err := state.Encode(back.doc)
	if err != nil {
		return err
	}
	exp, err := state.Encode(want)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, exp) {
		return fmt.Errorf("verify the split state: %s reads back differently from %s; the one value is untouched", b.name(), b.LegacyKey())
	}
	return nil
}

// OldLayout reports whether the state is stored as one value (LegacyKey)
// and not in the split layout: what MigrateLayout moves. It reads no
// values.
func (b *Backend) OldLayout(ctx context.Context) (bool, error) {
	resp, err := b.client.Txn(ctx).Then(
		clientv3.OpGet(b.LegacyKey(), clientv3.WithKeysOnly()),
		clientv3.OpGet(b.StateKey(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return false, fmt.Errorf("read state %s: %w", b.name(), err)
	}
	return len(resp.Responses[0].GetResponseRange().Kvs) > 0 && len(resp.Responses[1].GetResponseRange().Kvs) == 0, nil
}
