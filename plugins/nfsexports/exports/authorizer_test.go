package exports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/provider"
)

func newAuthorizer(t *testing.T, exportfs string) *Authorizer {
	t.Helper()
	a, err := New(Config{File: filepath.Join(t.TempDir(), "exports.d", "infrakit.exports"), Exportfs: exportfs})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func member(id, host string) nfs.Authorization {
	props, _ := json.Marshal(map[string]string{"host": host, "volume": "/srv/nfs"})
	return nfs.Authorization{
		SourceID: instance.ID(id), Host: host, Volume: "/srv/nfs", Properties: props,
		Tags: map[string]string{"infrakit.enrollment.name": "nfs", "infrakit.enrollment.source_id": id},
	}
}

func TestLifecycle(t *testing.T) {
	a := newAuthorizer(t, "infrakit-test-no-such-exportfs") // absent: not an error
	ctx := context.Background()
	id1, err := a.Authorize(ctx, member("m1", "10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	// Fields empty: host, volume and options come from the properties.
	id2, err := a.Authorize(ctx, nfs.Authorization{SourceID: "m2", Properties: json.RawMessage(`{"host": "10.0.0.2", "volume": "/srv/other", "options": ["ro"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("describe: %+v", got)
	}
	byID := map[string]nfs.Authorization{got[0].ID: got[0], got[1].ID: got[1]}
	if x := byID[id1]; x.SourceID != "m1" || x.Host != "10.0.0.1" || x.Volume != "/srv/nfs" || x.Options != nil || x.Tags["infrakit.enrollment.source_id"] != "m1" {
		t.Errorf("authorization 1: %+v", x)
	}
	if x := byID[id2]; x.Host != "10.0.0.2" || x.Volume != "/srv/other" || !slices.Equal(x.Options, []string{"ro"}) {
		t.Errorf("authorization 2: %+v", x)
	}
	data, err := os.ReadFile(a.File())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"/srv/nfs 10.0.0.1(rw,sync,no_subtree_check)\n", "/srv/other 10.0.0.2(ro)\n"} {
		if !strings.Contains(string(data), line) {
			t.Errorf("file lacks %q:\n%s", line, data)
		}
	}
	if err := a.Revoke(ctx, id1); err != nil {
		t.Fatal(err)
	}
	if err := a.Revoke(ctx, id1); err != nil {
		t.Fatalf("revoking again: %v", err)
	}
	if got, _ := a.Describe(ctx); len(got) != 1 || got[0].ID != id2 {
		t.Fatalf("after revoke: %+v", got)
	}
	if err := a.Revoke(ctx, id2); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(a.File())
	if string(data) != header {
		t.Fatalf("with no authorizations the file holds only the header:\n%s", data)
	}
	entries, _ := os.ReadDir(filepath.Dir(a.File()))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"infrakit.exports", "infrakit.exports.lock"}) {
		t.Errorf("the directory holds %q; temporary files must be gone", names)
	}
}

func TestAuthorizeRefusesBadInput(t *testing.T) {
	a := newAuthorizer(t, "none")
	ctx := context.Background()
	tests := []struct {
		auth nfs.Authorization
		path []string
	}{
		{nfs.Authorization{SourceID: "m", Host: "bad host", Volume: "/srv"}, []string{"host"}},
		{nfs.Authorization{SourceID: "m", Host: "h(rw)", Volume: "/srv"}, []string{"host"}},
		{nfs.Authorization{SourceID: "m", Host: "h", Volume: "relative"}, []string{"volume"}},
		{nfs.Authorization{SourceID: "m", Host: "h", Volume: "/srv", Options: []string{"rw", "nope"}}, []string{"options", "1"}},
		{nfs.Authorization{SourceID: "m", Volume: "/srv"}, []string{"host"}},
		{nfs.Authorization{SourceID: "m", Properties: json.RawMessage(`{"host": "h", "volume": "/srv", "colour": "red"}`)}, []string{"colour"}},
		{nfs.Authorization{Host: "h", Volume: "/srv"}, nil},
	}
	for _, tt := range tests {
		_, err := a.Authorize(ctx, tt.auth)
		var ds provider.Diagnostics
		if !errors.As(err, &ds) || !slices.ContainsFunc(ds, func(d provider.Diagnostic) bool { return slices.Equal(d.Path, tt.path) }) {
			t.Errorf("%+v: want a diagnostic at %q, got %v", tt.auth, tt.path, err)
		}
	}
	if _, err := os.Stat(a.File()); err == nil {
		t.Error("refused authorizations wrote the file")
	}
}

// TestAtomicWrite: a reader polling the file while authorizations are
// added one by one always sees a whole file, with never fewer
// authorizations than it saw before.
func TestAtomicWrite(t *testing.T) {
	a := newAuthorizer(t, "none")
	ctx := context.Background()
	const n = 60
	var stop atomic.Bool
	var reads, maxSeen atomic.Int64
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		last := 0
		for !stop.Load() {
			data, err := os.ReadFile(a.File())
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				errc <- err
				return
			}
			es, _, err := Parse(data)
			if err != nil {
				errc <- fmt.Errorf("read %d: a partial file was visible: %w\n%s", reads.Load(), err, data)
				return
			}
			if len(es) < last {
				errc <- fmt.Errorf("read %d: %d authorizations after %d", reads.Load(), len(es), last)
				return
			}
			last = len(es)
			maxSeen.Store(int64(last))
			reads.Add(1)
		}
	})
	for i := range n {
		// Long tags make the file large, so a write in place would be
		// seen half done.
		auth := member(fmt.Sprintf("m%02d", i), fmt.Sprintf("10.0.0.%d", i+1))
		auth.Tags["padding"] = strings.Repeat("x", 4096)
		if _, err := a.Authorize(ctx, auth); err != nil {
			t.Fatal(err)
		}
	}
	// Let the reader see the last write before stopping it.
	for deadline := time.Now().Add(5 * time.Second); maxSeen.Load() != n && time.Now().Before(deadline) && len(errc) == 0; {
		time.Sleep(5 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	if reads.Load() < 10 || maxSeen.Load() != n {
		t.Fatalf("the reader read %d times and saw at most %d of %d", reads.Load(), maxSeen.Load(), n)
	}
	t.Logf("%d consistent reads during %d writes", reads.Load(), n)
}

// TestConcurrentAuthorizers: two Authorizers on one file (as two provider
// processes would be; the flock is per open file, so this is the same
// contention) never lose each other's authorizations.
func TestConcurrentAuthorizers(t *testing.T) {
	file := filepath.Join(t.TempDir(), "infrakit.exports")
	var as [2]*Authorizer
	for i := range as {
		a, err := New(Config{File: file, Exportfs: "none"})
		if err != nil {
			t.Fatal(err)
		}
		as[i] = a
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		for j, a := range as {
			wg.Go(func() {
				_, err := a.Authorize(ctx, member(fmt.Sprintf("m%d-%d", j, i), "10.0.0.1"))
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := as[1].Describe(ctx)
	if err != nil || len(got) != 40 {
		t.Fatalf("%d authorizations (%v), want 40", len(got), err)
	}
}

// TestExportfs: a change runs `exportfs -ra` when the command exists; a
// failing exportfs is an error, but the file is written.
func TestExportfs(t *testing.T) {
	bin := t.TempDir()
	log := filepath.Join(bin, "calls")
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %s\n[ -e %s.fail ] && { echo 'exportfs: cannot export' >&2; exit 1; }\nexit 0\n", log, log)
	if err := os.WriteFile(filepath.Join(bin, "exportfs"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	a := newAuthorizer(t, "") // default: exportfs from PATH
	ctx := context.Background()
	id, err := a.Authorize(ctx, member("m1", "10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Revoke(ctx, "unknown"); err != nil { // no change: no run
		t.Fatal(err)
	}
	if err := a.Revoke(ctx, id); err != nil {
		t.Fatal(err)
	}
	calls, err := os.ReadFile(log)
	if err != nil || string(calls) != "-ra\n-ra\n" {
		t.Fatalf("exportfs calls %q (%v), want two of -ra", calls, err)
	}
	if err := os.WriteFile(log+".fail", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = a.Authorize(ctx, member("m2", "10.0.0.2"))
	if err == nil || !strings.Contains(err.Error(), "cannot export") {
		t.Fatalf("want exportfs's failure, got %v", err)
	}
	if got, _ := a.Describe(ctx); len(got) != 1 || got[0].SourceID != "m2" {
		t.Fatalf("the file is written even when exportfs fails: %+v", got)
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := map[string]string{EnvFile: "/tmp/x/infrakit.exports", EnvExportfs: "none", EnvDefaultOptions: "ro,root_squash"}
	c, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || c.File != "/tmp/x/infrakit.exports" || c.Exportfs != "none" || !slices.Equal(c.DefaultOptions, []string{"ro", "root_squash"}) {
		t.Fatalf("config %+v %v", c, err)
	}
	for _, bad := range []string{"rw,ro", "rw,,sync", "bogus"} {
		if _, err := ConfigFromEnv(func(k string) string { return map[string]string{EnvDefaultOptions: bad}[k] }); err == nil {
			t.Errorf("%s=%q accepted", EnvDefaultOptions, bad)
		}
	}
}
