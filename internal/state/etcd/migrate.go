package etcd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
	"github.com/infrakit/infrakit/sdk/atomicfile"
)

// RecordFile is where `infrakit init` records, in the working directory,
// the backend the state was last initialized in (JSON of config.Backend,
// without the password). Without it the state is in the local file.
const RecordFile = ".infrakit/backend.json"

// ReadRecord returns the backend recorded in workDir, or a local backend
// when nothing is recorded. A recorded etcd backend with a username takes
// its password from $INFRAKIT_ETCD_PASSWORD.
func ReadRecord(workDir string) (*config.Backend, error) {
	data, err := os.ReadFile(filepath.Join(workDir, RecordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return &config.Backend{Type: config.BackendLocal}, nil
	}
	if err != nil {
		return nil, err
	}
	var b config.Backend
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("%s: %w", RecordFile, err)
	}
	if b.Type == "" {
		return nil, fmt.Errorf("%s: no backend type", RecordFile)
	}
	if b.Username != "" {
		b.Password = os.Getenv(config.EtcdPasswordEnv)
	}
	return &b, nil
}

// WriteRecord records b (nil: local) in workDir.
func WriteRecord(workDir string, b *config.Backend) error {
	if b == nil {
		b = &config.Backend{Type: config.BackendLocal}
	}
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(workDir, RecordFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o600)
}

// ErrBackendChanged: the stack's backend block is not the backend
// `infrakit init` recorded; commands must not guess which holds the state.
var ErrBackendChanged = errors.New(`the backend changed since "infrakit init"`)

// CheckRecord returns nil when configured (the stack's backend block; nil
// means local) is the backend recorded in workDir, and otherwise an error
// matching ErrBackendChanged that tells the user to run init. Commands that
// read or write state call it after loading the stack.
func CheckRecord(workDir string, configured *config.Backend) error {
	recorded, err := ReadRecord(workDir)
	if err != nil {
		return err
	}
	if SameBackend(recorded, configured) {
		return nil
	}
	if configured.IsLocal() {
		configured = &config.Backend{Type: config.BackendLocal}
	}
	return fmt.Errorf("%w: the stack says %s but the state was initialized in %s; run \"infrakit init\" (with -migrate-state to move the state)",
		ErrBackendChanged, configured, recorded)
}

// SameBackend reports whether a and b (nil: local) name the same state
// location without asking etcd: both local, or both etcd with one prefix
// and the same endpoints. Two etcd backends with one prefix and different
// endpoints may still be one cluster; compare Backend.ClusterID.
func SameBackend(a, b *config.Backend) bool {
	if a.IsLocal() || b.IsLocal() {
		return a.IsLocal() && b.IsLocal()
	}
	if a.Type != b.Type || a.Prefix != b.Prefix {
		return false
	}
	ea, eb := slices.Clone(a.Endpoints), slices.Clone(b.Endpoints)
	slices.Sort(ea)
	slices.Sort(eb)
	return slices.Equal(ea, eb)
}

// Migration is what Migrate did.
type Migration struct {
	// Moved is false when the source held no state (nothing to move).
	Moved bool
	// Resumed is true when the destination already held the very same
	// document: an earlier migration was interrupted after copying.
	Resumed bool
	Lineage string
	Serial  uint64
	// Backup says where the source's copy is kept.
	Backup string
}

// Migrate moves the state from one store to another without loss. Each of
// from and to is a *state.Local or a *Backend. It
//   - takes the lock of both (from first), waiting until ctx is done;
//   - reads the source; an empty source moves nothing;
//   - refuses when the destination holds a state, unless it is the very
//     same document (an interrupted migration, which is then finished);
//   - writes the document to the destination unchanged (same lineage and
//     serial), reads it back and compares it byte for byte;
//   - keeps the source as a backup: the local file is renamed to
//     infrakit.state.json.migrated, the etcd key moved to
//     <prefix>/state.migrated, so no process keeps using the old place.
func Migrate(ctx context.Context, from, to state.Store) (Migration, error) {
	src, err := migrator(from)
	if err != nil {
		return Migration{}, err
	}
	dst, err := migrator(to)
	if err != nil {
		return Migration{}, err
	}
	info := state.LockInfo{Operation: "init -migrate-state"}
	unlockFrom, err := from.Lock(ctx, info)
	if err != nil {
		return Migration{}, fmt.Errorf("lock the source state: %w", err)
	}
	defer unlockFrom()
	unlockTo, err := to.Lock(ctx, info)
	if err != nil {
		return Migration{}, fmt.Errorf("lock the destination state: %w", err)
	}
	defer unlockTo()

	doc, err := from.Read(ctx)
	if be, ok := from.(*Backend); ok && errors.Is(err, ErrOldLayout) {
		// A one-value state moves out as it is; it never has to be split.
		var kv *mvccpb.KeyValue
		if doc, kv, err = be.legacyDoc(ctx); err == nil {
			src = legacyMigrator{be, kv}
		}
	}
	if err != nil {
		return Migration{}, fmt.Errorf("read the source state: %w", err)
	}
	if doc.IsNew() {
		return Migration{}, nil
	}
	want, err := state.Encode(doc)
	if err != nil {
		return Migration{}, err
	}
	m := Migration{Moved: true, Lineage: doc.Lineage, Serial: doc.Serial}

	cur, err := to.Read(ctx)
	if err != nil {
		return Migration{}, fmt.Errorf("read the destination state: %w", err)
	}
	if !cur.IsNew() {
		have, err := state.Encode(cur)
		if err != nil {
			return Migration{}, err
		}
		if !bytes.Equal(have, want) {
			kind := state.ErrSerialMoved
			if cur.Lineage != doc.Lineage {
				kind = state.ErrLineage
			}
			return Migration{}, fmt.Errorf("the destination %s already holds a state (lineage %s, serial %d) and the source %s holds lineage %s, serial %d; refusing to overwrite it — move it away or point the backend elsewhere: %w",
				dst.name(), cur.Lineage, cur.Serial, src.name(), doc.Lineage, doc.Serial, kind)
		}
		m.Resumed = true
	} else if err := dst.create(ctx, doc); err != nil {
		return Migration{}, fmt.Errorf("write the destination state: %w", err)
	}

	back, err := to.Read(ctx)
	if err != nil {
		return Migration{}, fmt.Errorf("verify the destination state: %w", err)
	}
	got, err := state.Encode(back)
	if err != nil {
		return Migration{}, err
	}
	if !bytes.Equal(got, want) {
		return Migration{}, fmt.Errorf("verify the destination state: %s reads back differently from what was written; the source %s is untouched", dst.name(), src.name())
	}
	if m.Backup, err = src.moveAside(ctx, doc); err != nil {
		return Migration{}, fmt.Errorf("the state is in %s; keeping the source as a backup failed: %w", dst.name(), err)
	}
	return m, nil
}

// storeMigrator is the part of migrating that the Store interface lacks.
type storeMigrator interface {
	name() string
	// create stores doc unchanged where nothing is stored.
	create(ctx context.Context, doc *state.Document) error
	// moveAside keeps doc, still stored, as a backup out of the way and
	// says where.
	moveAside(ctx context.Context, doc *state.Document) (string, error)
}

func migrator(s state.Store) (storeMigrator, error) {
	switch s := s.(type) {
	case *Backend:
		return etcdMigrator{s}, nil
	case *state.Local:
		return localMigrator{s}, nil
	default:
		return nil, fmt.Errorf("cannot migrate state of a %T", s)
	}
}

type etcdMigrator struct{ b *Backend }

func (m etcdMigrator) name() string { return m.b.name() }
func (m etcdMigrator) create(ctx context.Context, doc *state.Document) error {
	return m.b.Create(ctx, doc)
}
func (m etcdMigrator) moveAside(ctx context.Context, doc *state.Document) (string, error) {
	return m.b.MigratedKey() + " in etcd", m.b.MoveAside(ctx, doc)
}

// legacyMigrator is the source side of a one-value state in etcd.
type legacyMigrator struct {
	b  *Backend
	kv *mvccpb.KeyValue
}

func (m legacyMigrator) name() string { return m.b.LegacyKey() + " in etcd" }
func (m legacyMigrator) create(context.Context, *state.Document) error {
	return errors.New("a state is never created in the one-value layout")
}
func (m legacyMigrator) moveAside(ctx context.Context, _ *state.Document) (string, error) {
	return m.b.MigratedKey() + " in etcd", m.b.moveLegacyAside(ctx, m.kv)
}

// localMigrator works on the local file directly, under its lock (which
// Migrate holds): Local itself has no way to store a document with its
// serial unchanged.
type localMigrator struct{ l *state.Local }

func (m localMigrator) name() string { return m.l.Path() }

func (m localMigrator) create(_ context.Context, doc *state.Document) error {
	data, err := state.Encode(doc)
	if err != nil {
		return err
	}
	return atomicfile.Create(m.l.Path(), data, 0o600)
}

func (m localMigrator) moveAside(ctx context.Context, doc *state.Document) (string, error) {
	cur, err := m.l.Read(ctx)
	if err != nil {
		return "", err
	}
	if cur.Lineage != doc.Lineage || cur.Serial != doc.Serial {
		return "", fmt.Errorf("%s changed during the migration (now lineage %s, serial %d)", m.l.Path(), cur.Lineage, cur.Serial)
	}
	aside := m.l.Path() + ".migrated"
	if err := os.Rename(m.l.Path(), aside); err != nil {
		return "", err
	}
	return aside, atomicfile.SyncDir(filepath.Dir(aside))
}
