package command

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/state"
	stateetcd "github.com/infrakit/infrakit/internal/state/etcd"
	"github.com/infrakit/infrakit/internal/state/etcd/etcdtest"
)

// TestInitMigrateState moves a local state into etcd with `init
// -migrate-state` and back, against a real etcd process (Debian's
// etcd-server package, which .ci/run installs).
func TestInitMigrateState(t *testing.T) {
	srv := startRealEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	wd := t.TempDir()
	local := state.NewLocal(filepath.Join(wd, operation.StateFile))
	writeStack(t, wd, `stack "mig" {}`)
	if code, _, stderr := runCommand(t, initCmd, wd); code != 0 {
		t.Fatalf("init: exit %d: %s", code, stderr)
	}
	if b, err := stateetcd.ReadRecord(wd); err != nil || b.Type != config.BackendLocal {
		t.Fatalf("recorded %+v, %v", b, err)
	}
	doc, _ := local.Read(ctx)
	for range 3 {
		doc.Group("web").Instances = append(doc.Group("web").Instances, state.Instance{ID: fmt.Sprint("i-", doc.Serial)})
		if err := local.Write(ctx, doc); err != nil {
			t.Fatal(err)
		}
	}

	// The stack now keeps its state in etcd: a plain init refuses to leave
	// the local state behind.
	writeStack(t, wd, fmt.Sprintf(`
stack "mig" {
  backend "etcd" {
    endpoints = [%q]
    lease_ttl = "2s"
  }
}
`, srv.Endpoints[0]))
	code, _, stderr := runCommand(t, initCmd, wd)
	if code != 1 || !strings.Contains(stderr, "-migrate-state") || !strings.Contains(stderr, "serial 3") {
		t.Fatalf("init with a changed backend: exit %d: %s", code, stderr)
	}

	code, stdout, stderr := runCommand(t, initCmd, wd, "-migrate-state")
	if code != 0 {
		t.Fatalf("init -migrate-state: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Migrating the state from local to etcd /infrakit/mig", "serial 3) and verified it", operation.StateFile + ".migrated"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	rec, err := stateetcd.ReadRecord(wd)
	if err != nil || rec.Type != config.BackendEtcd || rec.Prefix != "/infrakit/mig" {
		t.Fatalf("recorded %+v, %v", rec, err)
	}
	store, closeStore, err := stateetcd.OpenStore(rec, "unused")
	if err != nil {
		t.Fatal(err)
	}
	defer closeStore()
	inEtcd, err := store.Read(ctx)
	if err != nil || !reflect.DeepEqual(inEtcd, doc) {
		t.Fatalf("etcd holds %+v (%v), want %+v", inEtcd, err, doc)
	}
	if _, err := os.Stat(local.Path()); !os.IsNotExist(err) {
		t.Errorf("local state still in place: %v", err)
	}

	// Again: nothing to do.
	code, stdout, _ = runCommand(t, initCmd, wd, "-migrate-state")
	if code != 0 || !strings.Contains(stdout, "already in the configured backend") {
		t.Fatalf("second init -migrate-state: exit %d:\n%s", code, stdout)
	}

	// And back to the local file, with a change made in etcd.
	inEtcd.Group("web").Freed = true
	if err := store.Write(ctx, inEtcd); err != nil {
		t.Fatal(err)
	}
	writeStack(t, wd, `stack "mig" {}`)
	if code, stdout, stderr := runCommand(t, initCmd, wd, "-migrate-state"); code != 0 || !strings.Contains(stdout, "serial 4) and verified it") {
		t.Fatalf("init -migrate-state back: exit %d:\n%s\n%s", code, stdout, stderr)
	}
	back, err := local.Read(ctx)
	if err != nil || !reflect.DeepEqual(back, inEtcd) {
		t.Fatalf("local holds %+v (%v), want %+v", back, err, inEtcd)
	}
	if left, _ := store.Read(ctx); !left.IsNew() {
		t.Error("etcd still holds the state after migrating out")
	}
}

// TestInitMigrateStateLayout: a state that an older infrakit stored in
// etcd as one value is moved to the per-object layout by `init
// -migrate-state` (a plain init refuses to go on without it), keeping the
// one value as a backup; run again, it has nothing to do. Against a real
// etcd process.
func TestInitMigrateStateLayout(t *testing.T) {
	srv := startRealEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	wd := t.TempDir()
	writeStack(t, wd, fmt.Sprintf(`
stack "old" {
  backend "etcd" {
    endpoints = [%q]
    lease_ttl = "2s"
  }
}
`, srv.Endpoints[0]))
	if code, _, stderr := runCommand(t, initCmd, wd); code != 0 {
		t.Fatalf("init: exit %d: %s", code, stderr)
	}
	rec, err := stateetcd.ReadRecord(wd)
	if err != nil {
		t.Fatal(err)
	}
	be, err := stateetcd.Open(stateetcd.ConfigFrom(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	// What an older infrakit stored: the whole document at P/state.
	doc := state.NewDocument()
	doc.Serial = 4
	doc.Group("web").Instances = []state.Instance{{ID: "i-1"}, {ID: "i-2"}}
	data, err := state.Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := be.Client().Put(ctx, "/infrakit/old/state", string(data)); err != nil {
		t.Fatal(err)
	}
	if _, err := be.Read(ctx); !errors.Is(err, stateetcd.ErrOldLayout) {
		t.Fatalf("Read of the one-value state = %v", err)
	}

	code, _, stderr := runCommand(t, initCmd, wd)
	if code != 1 || !strings.Contains(stderr, `"infrakit init -migrate-state"`) || !strings.Contains(stderr, "as one value") {
		t.Fatalf("init over a one-value state: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCommand(t, initCmd, wd, "-migrate-state")
	if code != 0 {
		t.Fatalf("init -migrate-state: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"serial 4) from one value (/infrakit/old/state) to the per-object layout and verified it", "/infrakit/old/state.migrated in etcd"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	got, err := be.Read(ctx)
	if err != nil || !reflect.DeepEqual(got, doc) {
		t.Fatalf("after the migration etcd holds %+v (%v), want %+v", got, err, doc)
	}
	kept, err := be.Client().Get(ctx, "/infrakit/old/state.migrated")
	if err != nil || len(kept.Kvs) != 1 || string(kept.Kvs[0].Value) != string(data) {
		t.Fatalf("backup: %v, %v", kept, err)
	}
	code, stdout, _ = runCommand(t, initCmd, wd, "-migrate-state")
	if code != 0 || !strings.Contains(stdout, "nothing to migrate") {
		t.Fatalf("second init -migrate-state: exit %d:\n%s", code, stdout)
	}
	if code, _, stderr := runCommand(t, initCmd, wd); code != 0 {
		t.Fatalf("init after the migration: exit %d: %s", code, stderr)
	}
}

// startRealEtcd starts Debian's etcd for the test (skipping it when the
// package is absent); the test's cleanup stops it.
func startRealEtcd(t *testing.T) *etcdtest.Server {
	t.Helper()
	if _, err := os.Stat(etcdtest.RealBinary); err != nil {
		t.Skipf("%s is absent (apt-get install etcd-server; .ci/run installs it): %v", etcdtest.RealBinary, err)
	}
	srv, err := etcdtest.StartProcess(etcdtest.RealBinary, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}
