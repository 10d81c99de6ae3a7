package etcd

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/state"
)

// The two sides of a migration into and out of etcd (Migrate).

// Create stores doc exactly as it is — its serial too — where nothing is
// stored yet: how `init -migrate-state` brings a state in without changing
// its identity. Anything stored is a *state.ConflictError (ErrLineage for
// another state, ErrSerialMoved for this one); a one-value state of an
// older infrakit is an *OldLayoutError.
func (b *Backend) Create(ctx context.Context, doc *state.Document) error {
	if doc == nil || doc.IsNew() {
		return errors.New("create state: the document was never stored (serial 0); use Write")
	}
	if err := checkCreatable(b.name(), doc); err != nil {
		return fmt.Errorf("create state: %w", err)
	}
	ctx, cancel := graceful(ctx)
	defer cancel()
	b.mu.Lock()
	b.stats = WriteStats{}
	c := conds{holder: b.holder}
	b.mu.Unlock()
	e, err := encode(b.live(), doc, nil, func(string) []state.Instance { return nil })
	if err != nil {
		return fmt.Errorf("create state: %w", err)
	}
	rev, f, err := b.commit(ctx, b.live(), e, nil, 0, c)
	if err != nil {
		return fmt.Errorf("create state: %w", err)
	}
	if f == nil {
		b.written(ctx, e, rev, header(doc))
		return nil
	}
	if f.err != nil {
		return f.err
	}
	stored, err := b.storedHeader(f)
	if err != nil {
		return fmt.Errorf("create state: %w", err)
	}
	kind := state.ErrSerialMoved
	if stored.Lineage != doc.Lineage {
		kind = state.ErrLineage
	}
	return &state.ConflictError{State: b.name(), Kind: kind, Stored: stored, Read: header(doc)}
}

// checkCreatable refuses a document Read would refuse.
func checkCreatable(name string, doc *state.Document) error {
	data, err := state.Encode(doc)
	if err != nil {
		return err
	}
	_, err = state.Decode(name, data)
	return err
}

// MoveAside moves the stored document out of the way, conditioned on it
// still being doc (same lineage and serial): the source side of a
// migration out of etcd, kept as a backup under MigratedKey()+"/" (in the
// split layout, replacing a previous backup). The live head is deleted in
// one transaction, and then its parts.
func (b *Backend) MoveAside(ctx context.Context, doc *state.Document) error {
	l, err := b.load(ctx, b.live(), true)
	if err != nil {
		return fmt.Errorf("move state aside: %w", err)
	}
	stored := state.Header{}
	if l.rev > 0 {
		stored = header(l.doc)
	}
	if err := conflict(b.name(), stored, header(doc)); err != nil {
		return err
	}
	if _, err := b.client.Delete(ctx, b.MigratedKey(), clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("move state %s aside: %w", b.name(), err)
	}
	bk := b.backup()
	e, err := encode(bk, l.doc, nil, func(string) []state.Instance { return nil })
	if err != nil {
		return fmt.Errorf("move state aside: %w", err)
	}
	_, f, err := b.commit(ctx, bk, e, nil, 0, conds{})
	if err == nil && f != nil {
		err = errors.New("another process wrote there meanwhile")
	}
	if err != nil {
		return fmt.Errorf("move state %s aside: keep the backup in %s: %w", b.name(), b.MigratedKey(), err)
	}
	tr, err := b.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(b.StateKey()), "=", l.rev)).
		Then(clientv3.OpDelete(b.StateKey())).
		Commit()
	if err != nil {
		return fmt.Errorf("move state %s aside: %w", b.name(), err)
	}
	if !tr.Succeeded {
		return &state.ConflictError{State: b.name(), Kind: state.ErrSerialMoved, Stored: stored, Read: header(doc)}
	}
	b.sweep(ctx, b.live(), nil, 0)
	return nil
}
