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

	"github.com/infrakit/infrakit/plugins/prometheus/filesd"
	"github.com/infrakit/infrakit/plugins/prometheus/promtest"
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

// start launches the provider in dir (its working directory, the stack's).
func start(t *testing.T, dir string) *plugin.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := plugin.Start(ctx, plugin.ClientConfig{
		Name: "prometheus", Path: builder.Build(t, "."), Dir: dir,
		Logger: hclog.New(&hclog.LoggerOptions{Output: providertest.LogWriter(t), Level: hclog.Warn}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Kill)
	return c
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func diagnosticPaths(t *testing.T, err error) []string {
	t.Helper()
	var ds provider.Diagnostics
	if !errors.As(err, &ds) {
		t.Fatalf("want provider.Diagnostics, got %T %v", err, err)
	}
	var out []string
	for _, d := range ds {
		out = append(out, strings.Join(d.Path, "."))
	}
	return out
}

// TestConfigureOverTheWire: before its block reaches it the provider
// answers queries with an error naming the missing address; a bad block
// is refused at its attribute; a good one serves queries; a query that
// does not parse comes back as a diagnostic at query.
func TestConfigureOverTheWire(t *testing.T) {
	prom := promtest.Start(t, promtest.Config{})
	c := start(t, t.TempDir())
	src := c.Metrics("promql")
	if _, err := src.Query(callCtx(t), "vector(1)", time.Time{}); err == nil || !strings.Contains(err.Error(), "sets no address") {
		t.Fatalf("query before Configure: %v, want the missing address", err)
	}
	err := c.Configure(callCtx(t), json.RawMessage(`{"address": "`+prom.URL+`", "timeout": "1 minute"}`))
	if got := diagnosticPaths(t, err); !slices.Equal(got, []string{"timeout"}) {
		t.Fatalf("diagnostics at %q, want timeout: %v", got, err)
	}
	if err := c.Configure(callCtx(t), json.RawMessage(`{"address": "`+prom.URL+`"}`)); err != nil {
		t.Fatal(err)
	}
	got, err := src.Query(callCtx(t), "vector(2) * 3", time.Time{})
	if err != nil || got.Value != 6 || got.Empty {
		t.Fatalf("query: %+v, %v; want 6", got, err)
	}
	_, err = src.Query(callCtx(t), "sum(", time.Time{})
	if got := diagnosticPaths(t, err); !slices.Equal(got, []string{"query"}) {
		t.Fatalf("diagnostics at %q, want query: %v", got, err)
	}
}

// TestTwoProcesses: two provider processes (the CLI's and watch's) in one
// stack directory authorize and revoke at once into one target file;
// nothing is lost.
func TestTwoProcesses(t *testing.T) {
	dir := t.TempDir()
	a, b := start(t, dir), start(t, dir)
	var mu sync.Mutex
	ids := map[string]string{} // id -> source
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for i := range 15 {
		for j, c := range []*plugin.Client{a, b} {
			wg.Go(func() {
				src := fmt.Sprintf("m%d-%02d", j, i)
				id, err := c.Authorizer("file_sd").Authorize(callCtx(t), nfs.Authorization{
					SourceID:   instance.ID(src),
					Properties: json.RawMessage(fmt.Sprintf(`{"file": "prometheus/web.json", "address": "127.0.%d.%d:8080"}`, j, i+1)),
				})
				if err != nil {
					errs <- err
					return
				}
				if i%3 == 0 { // the other process revokes every third
					errs <- []*plugin.Client{b, a}[j].Authorizer("file_sd").Revoke(callCtx(t), id)
					return
				}
				mu.Lock()
				ids[id] = src
				mu.Unlock()
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
	got, err := b.Authorizer("file_sd").Describe(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ids) || len(ids) != 20 {
		t.Fatalf("%d authorizations described, %d made (want 20)", len(got), len(ids))
	}
	for _, x := range got {
		if ids[x.ID] != string(x.SourceID) {
			t.Errorf("authorization %s for %s was not made, or was revoked", x.ID, x.SourceID)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "prometheus", "web.json"))
	if err != nil {
		t.Fatal(err)
	}
	if entries, stray, err := filesd.Parse(data); err != nil || stray != 0 || len(entries) != 20 {
		t.Fatalf("the target file holds %d groups (%d stray, %v), want 20:\n%s", len(entries), stray, err, data)
	}
}
