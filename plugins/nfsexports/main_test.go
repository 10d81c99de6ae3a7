package main_test

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
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/plugin"
	"github.com/infrakit/infrakit/sdk/provider"
	"github.com/infrakit/infrakit/sdk/providertest"
)

var builder *providertest.Builder

type testMain struct{ m *testing.M }

func (r testMain) Run() int {
	defer builder.Close()
	return r.m.Run()
}

func TestMain(m *testing.M) {
	builder = providertest.NewBuilder()
	goleak.VerifyTestMain(testMain{m})
}

// env points the provider at an exports file in a temporary directory; the
// exportfs command is one that does not exist, so a machine that is an NFS
// server is never touched by the tests.
func env(t *testing.T) (file string, vars []string) {
	file = filepath.Join(t.TempDir(), "exports.d", "infrakit.exports")
	return file, []string{"INFRAKIT_NFS_EXPORTS_FILE=" + file, "INFRAKIT_NFS_EXPORTFS=infrakit-test-no-such-exportfs"}
}

func TestConformance(t *testing.T) {
	_, vars := env(t)
	providertest.Run(t, providertest.Config{
		Binary: builder.Build(t, "."),
		Env:    vars,
		Authorizer: map[string]providertest.AuthorizerCase{
			"exports": {
				Valid: json.RawMessage(`{"host": "192.0.2.20", "volume": "/srv/nfs/cattle", "options": ["rw", "sync"]}`),
				Invalid: []providertest.Invalid{
					{Properties: json.RawMessage(`{"host": "bad host", "volume": "/srv"}`), Path: []string{"host"}},
					{Properties: json.RawMessage(`{"host": "web(rw)", "volume": "/srv"}`), Path: []string{"host"}},
					{Properties: json.RawMessage(`{"host": "10.0.0.1", "volume": "srv/nfs"}`), Path: []string{"volume"}},
					{Properties: json.RawMessage(`{"host": "10.0.0.1", "volume": "/srv", "options": ["rw", "bogus"]}`), Path: []string{"options", "1"}},
					{Properties: json.RawMessage(`{"host": "10.0.0.1", "volume": "/srv", "options": ["rw", "ro"]}`), Path: []string{"options", "1"}},
					{Properties: json.RawMessage(`{"volume": "/srv"}`), Path: []string{"host"}},
					{Properties: json.RawMessage(`{"host": "h", "volume": "/srv", "iops": 10}`), Path: []string{"iops"}},
					{Properties: json.RawMessage(`[1]`)},
				},
			},
		},
	})
}

func start(t *testing.T, vars []string) *plugin.Client {
	t.Helper()
	logs := providertest.LogWriter(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := plugin.Start(ctx, plugin.ClientConfig{
		Name: "nfsexports", Path: builder.Build(t, "."), Env: vars,
		Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c
}

// TestTwoProcesses: two provider processes (the CLI's and watch's) on one
// exports file authorize and revoke at once; nothing is lost, the file
// lists exactly what both did.
func TestTwoProcesses(t *testing.T) {
	file, vars := env(t)
	a, b := start(t, vars), start(t, vars)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	ids := map[string]string{} // id -> source
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for i := range 15 {
		for j, c := range []*plugin.Client{a, b} {
			wg.Go(func() {
				src := fmt.Sprintf("m%d-%02d", j, i)
				id, err := c.Authorizer("exports").Authorize(ctx, nfs.Authorization{
					SourceID: instance.ID(src), Host: fmt.Sprintf("10.%d.0.%d", j, i+1), Volume: "/srv/nfs",
				})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				ids[id] = src
				mu.Unlock()
				// Every third is revoked by the other process.
				if i%3 == 0 {
					other := []*plugin.Client{b, a}[j]
					errs <- other.Authorizer("exports").Revoke(ctx, id)
					mu.Lock()
					delete(ids, id)
					mu.Unlock()
				}
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
	got, err := a.Authorizer("exports").Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) || len(ids) != 20 {
		t.Fatalf("%d authorizations described, %d expected (want 20)", len(got), len(ids))
	}
	for _, x := range got {
		if ids[x.ID] != string(x.SourceID) {
			t.Errorf("authorization %s for %s was not made (or was revoked)", x.ID, x.SourceID)
		}
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n/srv/nfs "); n != 20 {
		t.Fatalf("%d export lines, want 20:\n%s", n, data)
	}
}

// TestDiagnosticsOverTheWire: a refused authorization reaches the host as
// provider.Diagnostics at the attribute, and changes nothing.
func TestDiagnosticsOverTheWire(t *testing.T) {
	file, vars := env(t)
	c := start(t, vars)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Authorizer("exports").Authorize(ctx, nfs.Authorization{
		SourceID:   "compute-1",
		Properties: json.RawMessage(`{"host": "10.0.0.1 10.0.0.2", "volume": "/srv/nfs", "options": ["rw", "no_root_squash", "squash_all"]}`),
	})
	var ds provider.Diagnostics
	if !errors.As(err, &ds) {
		t.Fatalf("want provider.Diagnostics, got %v", err)
	}
	var paths []string
	for _, d := range ds {
		paths = append(paths, strings.Join(d.Path, "."))
	}
	if !slices.Equal(paths, []string{"host", "options.2"}) {
		t.Fatalf("diagnostics at %q, want host and options.2: %v", paths, err)
	}
	t.Logf("refused: %v", err)
	if _, err := os.Stat(file); err == nil {
		t.Fatal("a refused authorization wrote the file")
	}
}
