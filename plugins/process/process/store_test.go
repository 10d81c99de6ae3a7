//go:build linux

package process

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/instance"
)

func TestStore(t *testing.T) {
	s := store{dir: t.TempDir()}
	if err := s.init(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"process-b", "process-a"} {
		if err := s.write(record{ID: id, Port: 1, Tags: map[string]string{"k": id}}); err != nil {
			t.Fatal(err)
		}
	}
	// Strays: a corrupt record, one naming another instance, a temp file.
	os.WriteFile(filepath.Join(s.instancesDir(), "process-c.json"), []byte(`{"id": `), 0o644)
	os.WriteFile(filepath.Join(s.instancesDir(), "process-d.json"), []byte(`{"id": "process-a"}`), 0o644)
	os.WriteFile(filepath.Join(s.instancesDir(), ".process-e.json.1.tmp"), []byte(`{}`), 0o644)

	recs, problems, err := s.list()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	if !slices.Equal(ids, []string{"process-a", "process-b"}) || len(problems) != 2 {
		t.Fatalf("list = %v, problems %v; want a and b, and 2 problems", ids, problems)
	}
	if !strings.Contains(problems[0].Error()+problems[1].Error(), "names instance") {
		t.Errorf("problems %v", problems)
	}

	rec, found, err := s.update(context.Background(), "process-a", func(r *record) { r.Tags["x"] = "y"; r.Terminating = true })
	if err != nil || !found || rec.Tags["x"] != "y" {
		t.Fatalf("update = %+v, %v, %v", rec, found, err)
	}
	if got, _, _ := s.read("process-a"); !got.Terminating || got.Tags["x"] != "y" {
		t.Fatalf("read after update = %+v", got)
	}
	if _, found, err := s.update(context.Background(), "process-z", func(*record) { t.Fatal("called for a missing record") }); found || err != nil {
		t.Fatalf("update of a missing record = %v, %v", found, err)
	}
	if err := s.remove("process-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.remove("process-a"); err != nil {
		t.Fatalf("removing twice: %v", err)
	}
	if _, found, err := s.read("../../etc/passwd"); found || err != nil {
		t.Fatalf("read of an ID outside the store = %v, %v", found, err)
	}
}

// TestLockExcludes: a second lock waits for the first and gives up when
// its context ends.
func TestLockExcludes(t *testing.T) {
	s := store{dir: t.TempDir()}
	unlock, err := s.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.lock(ctx); err == nil {
		t.Fatal("a second lock was granted while the first was held")
	}
	got := make(chan error, 1)
	go func() {
		u, err := s.lock(context.Background())
		if err == nil {
			u()
		}
		got <- err
	}()
	time.Sleep(20 * time.Millisecond)
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting lock was not granted after unlock")
	}
}

// TestFailedProvisionLeavesNothing: no record, no log files.
func TestFailedProvisionLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := held.Addr().(*net.TCPAddr).Port
	for _, pr := range []map[string]any{
		{"command": "sh", "ports": map[string]int{"from": port, "to": port}}, // no free port
		{"command": "./missing"},
	} {
		if id, err := p.Provision(context.Background(), instance.Spec{Properties: props(t, pr)}); err == nil {
			t.Fatalf("provision %v = %s, want an error", pr, id)
		}
	}
	for _, sub := range []string{"instances", "logs"} {
		if entries, _ := os.ReadDir(filepath.Join(dir, sub)); len(entries) != 0 {
			t.Errorf("%s holds %v after failed provisions", sub, entries)
		}
	}
}
