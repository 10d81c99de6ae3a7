package etcd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
)

// localWithState is a local state written five times.
func localWithState(t *testing.T) (*state.Local, *state.Document) {
	t.Helper()
	l := state.NewLocal(filepath.Join(t.TempDir(), "infrakit.state.json"))
	ctx := ctxT(t)
	doc, err := l.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		addMarker(doc, string(rune('a'+i)))
		if err := l.Write(ctx, doc); err != nil {
			t.Fatal(err)
		}
	}
	return l, doc
}

func TestMigrateRoundTrip(t *testing.T) {
	ctx := ctxT(t)
	l, doc := localWithState(t)
	b := newBackend(t)

	m, err := Migrate(ctx, l, b)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Moved || m.Resumed || m.Serial != 5 || m.Lineage != doc.Lineage || m.Backup != l.Path()+".migrated" {
		t.Fatalf("migration %+v", m)
	}
	got, err := b.Read(ctx)
	if err != nil || !reflect.DeepEqual(got, doc) {
		t.Fatalf("etcd holds %+v (%v), want %+v", got, err, doc)
	}
	if _, err := os.Stat(l.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the local state is still in place (%v)", err)
	}
	if kept, err := state.NewLocal(l.Path() + ".migrated").Read(ctx); err != nil || !reflect.DeepEqual(kept, doc) {
		t.Errorf("backup %+v (%v)", kept, err)
	}

	// Work goes on in etcd, then the state moves back.
	addMarker(got, "in etcd")
	if err := b.Write(ctx, got); err != nil {
		t.Fatal(err)
	}
	m, err = Migrate(ctx, b, l)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Moved || m.Serial != 6 || m.Backup != b.MigratedKey()+" in etcd" {
		t.Fatalf("migration back %+v", m)
	}
	back, err := l.Read(ctx)
	if err != nil || !reflect.DeepEqual(back, got) {
		t.Fatalf("local holds %+v (%v), want %+v", back, err, got)
	}
	if v := storedValue(t, b); v != "" {
		t.Error("etcd still holds the state after migrating out")
	}
	// The local state is usable as ever.
	if _, err := lockedIncrement(l, "local again"); err != nil {
		t.Fatal(err)
	}
}

func TestMigrateRefusals(t *testing.T) {
	ctx := ctxT(t)
	l, doc := localWithState(t)
	b := newBackend(t)

	// The destination holds another state: refused, nothing touched.
	other := state.NewDocument()
	if err := b.Write(ctx, other); err != nil {
		t.Fatal(err)
	}
	_, err := Migrate(ctx, l, b)
	if !errors.Is(err, state.ErrLineage) {
		t.Fatalf("migrating over another state = %v, want ErrLineage", err)
	}
	if got, _ := l.Read(ctx); !reflect.DeepEqual(got, doc) {
		t.Error("a refused migration changed the source")
	}
	if got, _ := b.Read(ctx); got.Lineage != other.Lineage {
		t.Error("a refused migration changed the destination")
	}

	// The source's lock is held: the migration waits, then names the holder.
	if _, err := b.Client().Delete(ctx, b.StateKey()); err != nil {
		t.Fatal(err)
	}
	unlock, err := l.Lock(ctx, state.LockInfo{Operation: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = Migrate(short, l, b)
	var le *state.LockedError
	if !errors.As(err, &le) || le.Holder.Operation != "apply" {
		t.Fatalf("migration while locked = %v", err)
	}
	unlock()

	// An interrupted migration (copied, source still in place) finishes.
	if err := b.Create(ctx, doc); err != nil {
		t.Fatal(err)
	}
	m, err := Migrate(ctx, l, b)
	if err != nil || !m.Resumed || !m.Moved {
		t.Fatalf("resumed migration %+v, %v", m, err)
	}

	// An empty source moves nothing.
	m, err = Migrate(ctx, state.NewLocal(filepath.Join(t.TempDir(), "none.json")), New(b.Client(), Options{Prefix: prefix(t) + "/empty"}))
	if err != nil || m.Moved {
		t.Fatalf("empty migration %+v, %v", m, err)
	}
}

func TestRecord(t *testing.T) {
	dir := t.TempDir()
	b, err := ReadRecord(dir)
	if err != nil || !b.IsLocal() {
		t.Fatalf("nothing recorded: %+v, %v", b, err)
	}
	t.Setenv(config.EtcdPasswordEnv, "secret")
	want := &config.Backend{Type: config.BackendEtcd, Endpoints: []string{"a:1"}, Prefix: "/p", LeaseTTL: config.DefaultLeaseTTL, Username: "u", Password: "secret"}
	if err := WriteRecord(dir, want); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, RecordFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(data) == "" || filepath.Base(RecordFile) != "backend.json" || strings.Contains(string(data), "secret") {
		t.Fatalf("record %s", data)
	}
	got, err := ReadRecord(dir)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %+v (%v), want %+v", got, err, want)
	}
	if err := WriteRecord(dir, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadRecord(dir); err != nil || got.Type != config.BackendLocal {
		t.Fatalf("local record %+v, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, RecordFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRecord(dir); err == nil {
		t.Error("a corrupt record was accepted")
	}
}

func TestCheckRecord(t *testing.T) {
	dir := t.TempDir()
	etcdBackend := &config.Backend{Type: config.BackendEtcd, Endpoints: []string{"a:1"}, Prefix: "/p"}
	// A directory initialized before backends were recorded is local.
	if err := CheckRecord(dir, nil); err != nil {
		t.Errorf("no record, no backend: %v", err)
	}
	err := CheckRecord(dir, etcdBackend)
	if !errors.Is(err, ErrBackendChanged) || !strings.Contains(err.Error(), "etcd /p at a:1") || !strings.Contains(err.Error(), "infrakit init") {
		t.Errorf("etcd configured, local recorded: %v", err)
	}
	if err := WriteRecord(dir, etcdBackend); err != nil {
		t.Fatal(err)
	}
	if err := CheckRecord(dir, etcdBackend); err != nil {
		t.Errorf("recorded etcd: %v", err)
	}
	if err := CheckRecord(dir, nil); !errors.Is(err, ErrBackendChanged) || !strings.Contains(err.Error(), "the stack says local") {
		t.Errorf("local configured, etcd recorded: %v", err)
	}
}

func TestSameBackend(t *testing.T) {
	etcd := func(prefix string, eps ...string) *config.Backend {
		return &config.Backend{Type: config.BackendEtcd, Prefix: prefix, Endpoints: eps}
	}
	local := &config.Backend{Type: config.BackendLocal}
	tests := []struct {
		a, b *config.Backend
		want bool
	}{
		{nil, nil, true},
		{nil, local, true},
		{local, etcd("/p", "a"), false},
		{etcd("/p", "a", "b"), etcd("/p", "b", "a"), true},
		{etcd("/p", "a"), etcd("/q", "a"), false},
		{etcd("/p", "a"), etcd("/p", "c"), false},
	}
	for _, tt := range tests {
		if got := SameBackend(tt.a, tt.b); got != tt.want {
			t.Errorf("SameBackend(%v, %v) = %v", tt.a, tt.b, got)
		}
	}
}

// TestMigrateOutOfOldLayout: a one-value state in etcd moves to the local
// file as it is, and the one value is kept at MigratedKey.
func TestMigrateOutOfOldLayout(t *testing.T) {
	ctx := ctxT(t)
	b := newBackend(t)
	doc, data := putOldLayout(t, b, 3)
	l := state.NewLocal(filepath.Join(t.TempDir(), "infrakit.state.json"))
	m, err := Migrate(ctx, b, l)
	if err != nil || !m.Moved || m.Serial != 3 || m.Backup != b.MigratedKey()+" in etcd" {
		t.Fatalf("Migrate = %+v, %v", m, err)
	}
	if got, err := l.Read(ctx); err != nil || !reflect.DeepEqual(got, doc) {
		t.Fatalf("local holds %+v (%v)", got, err)
	}
	resp, err := b.Client().Get(ctx, b.MigratedKey())
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != string(data) {
		t.Fatalf("backup %v, %v", resp, err)
	}
	if left, err := b.Read(ctx); err != nil || !left.IsNew() {
		t.Fatalf("etcd still holds %+v (%v)", left, err)
	}
}
