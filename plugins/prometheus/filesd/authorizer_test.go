package filesd

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

	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/provider"
)

// newAuthorizer works in a fresh directory, which is the test's working
// directory too (as the stack directory is the provider's).
func newAuthorizer(t *testing.T) (*Authorizer, string) {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	a, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	return a, dir
}

// member is the authorization an enrollment makes for a member.
func member(id, file, addr string, labels string) nfs.Authorization {
	props := fmt.Sprintf(`{"file": %q, "address": %q`, file, addr)
	if labels != "" {
		props += `, "labels": ` + labels
	}
	return nfs.Authorization{
		SourceID:   instance.ID(id),
		Properties: json.RawMessage(props + "}"),
		Tags:       map[string]string{"infrakit.enrollment.name": "scrape", "infrakit.enrollment.source_id": id},
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func authorize(t *testing.T, a *Authorizer, auth nfs.Authorization) string {
	t.Helper()
	id, err := a.Authorize(ctx(t), auth)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func describe(t *testing.T, a *Authorizer) []nfs.Authorization {
	t.Helper()
	got, err := a.Describe(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// groups reads a target file as Prometheus does.
func groups(t *testing.T, file string) []group {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var gs []group
	if err := json.Unmarshal(b, &gs); err != nil {
		t.Fatalf("%s: %v\n%s", file, err, b)
	}
	return gs
}

func registered(t *testing.T, a *Authorizer) []string {
	t.Helper()
	r, err := readRegistry(a.registryFile())
	if err != nil {
		t.Fatal(err)
	}
	return r.Files
}

func TestLifecycle(t *testing.T) {
	a, dir := newAuthorizer(t)
	file := filepath.Join(dir, "prometheus", "web.json")
	labels := `{"infrakit_stack": "mystack", "infrakit_group": "web"}`
	m1 := member("process-1", "prometheus/web.json", "127.0.0.1:20001", labels)
	m2 := member("process-2", "prometheus/web.json", "127.0.0.1:20002", labels)
	m2.Tags["infrakit.logical_id"] = "web-b"
	id1, id2 := authorize(t, a, m1), authorize(t, a, m2)
	if id1 == id2 || !strings.HasPrefix(id1, "sd-") {
		t.Fatalf("IDs %q and %q", id1, id2)
	}

	gs := groups(t, file)
	if len(gs) != 2 {
		t.Fatalf("%d target groups, want 2: %+v", len(gs), gs)
	}
	byTarget := map[string]map[string]string{}
	for _, g := range gs {
		if len(g.Targets) != 1 {
			t.Fatalf("group %+v has %d targets, want 1", g, len(g.Targets))
		}
		byTarget[g.Targets[0]] = g.Labels
	}
	l := byTarget["127.0.0.1:20002"]
	if l["infrakit_stack"] != "mystack" || l["infrakit_group"] != "web" || l["infrakit_instance"] != "process-2" || l["infrakit_logical_id"] != "web-b" || l[RecordLabel] == "" {
		t.Errorf("labels of the second member: %v", l)
	}
	if _, pet := byTarget["127.0.0.1:20001"]["infrakit_logical_id"]; pet {
		t.Errorf("a cattle member has a logical ID label: %v", byTarget["127.0.0.1:20001"])
	}

	got := describe(t, a)
	if len(got) != 2 {
		t.Fatalf("described %d, want 2: %+v", len(got), got)
	}
	for _, x := range got {
		want := map[string]nfs.Authorization{id1: m1, id2: m2}[x.ID]
		if x.SourceID != want.SourceID || !equalMaps(x.Tags, want.Tags) || string(canonical(x.Properties)) != string(canonical(want.Properties)) {
			t.Errorf("described %+v, want %+v", x, want)
		}
	}

	// The same authorization again is the one there is.
	if again := authorize(t, a, m1); again != id1 {
		t.Fatalf("authorizing the same member again gave %q, want %q", again, id1)
	}
	if n := len(groups(t, file)); n != 2 {
		t.Fatalf("%d groups after a repeated authorize, want 2", n)
	}

	if err := a.Revoke(ctx(t), id1); err != nil {
		t.Fatal(err)
	}
	if gs := groups(t, file); len(gs) != 1 || gs[0].Targets[0] != "127.0.0.1:20002" {
		t.Fatalf("after revoking the first: %+v", gs)
	}
	for _, id := range []string{id1, "sd-unknown", ""} {
		if err := a.Revoke(ctx(t), id); err != nil {
			t.Fatalf("revoke %q, which is gone: %v", id, err)
		}
	}
	if err := a.Revoke(ctx(t), id2); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "[]\n" {
		t.Fatalf("the last revoke left %q (%v), want an empty list", b, err)
	}
	if r := registered(t, a); len(r) != 0 {
		t.Fatalf("registry still lists %q", r)
	}
	if got := describe(t, a); len(got) != 0 {
		t.Fatalf("described %+v after every revoke", got)
	}
}

// TestChangedProperties: an enrollment whose labels changed authorizes the
// new one before it revokes the old; both are listed in between.
func TestChangedProperties(t *testing.T) {
	a, dir := newAuthorizer(t)
	old := authorize(t, a, member("m", "web.json", "127.0.0.1:1", `{"tier": "a"}`))
	renewed := authorize(t, a, member("m", "web.json", "127.0.0.1:1", `{"tier": "b"}`))
	if renewed == old {
		t.Fatal("changed properties gave the old authorization's ID")
	}
	if n := len(groups(t, filepath.Join(dir, "web.json"))); n != 2 {
		t.Fatalf("%d groups, want both until the old is revoked", n)
	}
	if err := a.Revoke(ctx(t), old); err != nil {
		t.Fatal(err)
	}
	gs := groups(t, filepath.Join(dir, "web.json"))
	if len(gs) != 1 || gs[0].Labels["tier"] != "b" {
		t.Fatalf("after the revoke: %+v", gs)
	}
}

// TestSeveralFiles: each authorization lives in its own file; a member
// moved to another file leaves the first, which then leaves the registry.
func TestSeveralFiles(t *testing.T) {
	a, dir := newAuthorizer(t)
	abs := filepath.Join(dir, "abs", "api.json")
	web := authorize(t, a, member("w", "web.json", "127.0.0.1:1", ""))
	api := authorize(t, a, member("a", abs, "127.0.0.1:2", ""))
	if r := registered(t, a); !slices.Equal(r, []string{abs, filepath.Join(dir, "web.json")}) {
		t.Fatalf("registry %q", r)
	}
	moved := authorize(t, a, member("w", "other.json", "127.0.0.1:1", ""))
	if err := a.Revoke(ctx(t), web); err != nil {
		t.Fatal(err)
	}
	if r := registered(t, a); !slices.Equal(r, []string{abs, filepath.Join(dir, "other.json")}) {
		t.Fatalf("registry %q", r)
	}
	var ids []string
	for _, x := range describe(t, a) {
		ids = append(ids, x.ID)
	}
	if want := slices.Sorted(slices.Values([]string{api, moved})); !slices.Equal(ids, want) {
		t.Fatalf("described %q, want %q", ids, want)
	}
}

// TestFilesAreTheState: a target file removed by hand takes its
// authorizations with it (the next pass authorizes again); a lost
// registry is rebuilt from the files the next change names.
func TestFilesAreTheState(t *testing.T) {
	a, dir := newAuthorizer(t)
	file := filepath.Join(dir, "web.json")
	id := authorize(t, a, member("m1", "web.json", "127.0.0.1:1", ""))
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if got := describe(t, a); len(got) != 0 {
		t.Fatalf("described %+v with the file gone", got)
	}
	if err := a.Revoke(ctx(t), id); err != nil {
		t.Fatalf("revoke with the file gone: %v", err)
	}

	id = authorize(t, a, member("m1", "web.json", "127.0.0.1:1", ""))
	if err := os.Remove(a.registryFile()); err != nil {
		t.Fatal(err)
	}
	if got := describe(t, a); len(got) != 0 {
		t.Fatalf("described %+v without a registry", got)
	}
	id2 := authorize(t, a, member("m2", "web.json", "127.0.0.1:2", ""))
	var ids []string
	for _, x := range describe(t, a) {
		ids = append(ids, x.ID)
	}
	if want := slices.Sorted(slices.Values([]string{id, id2})); !slices.Equal(ids, want) {
		t.Fatalf("described %q, want %q: the file's authorization is back once it is registered again", ids, want)
	}
}

// TestStraysDropped: target groups someone else wrote into the file go at
// the next change.
func TestStraysDropped(t *testing.T) {
	a, dir := newAuthorizer(t)
	file := filepath.Join(dir, "web.json")
	if err := os.WriteFile(file, []byte(`[{"targets": ["10.0.0.9:80"]}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	authorize(t, a, member("m1", "web.json", "127.0.0.1:1", ""))
	if gs := groups(t, file); len(gs) != 1 || gs[0].Targets[0] != "127.0.0.1:1" {
		t.Fatalf("groups %+v", gs)
	}
	if err := os.WriteFile(file, []byte(`[{"targets": `), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Describe(ctx(t)); err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("describe of a broken file: %v, want an error naming it", err)
	}
}

// TestRefused: bad properties and an authorization without a member are
// diagnostics, and write nothing.
func TestRefused(t *testing.T) {
	a, dir := newAuthorizer(t)
	for _, auth := range []nfs.Authorization{
		member("m", "web.json", "", `{"infrakit.group": "web"}`),
		member("", "web.json", "127.0.0.1:1", ""),
	} {
		_, err := a.Authorize(ctx(t), auth)
		var ds provider.Diagnostics
		if !errors.As(err, &ds) {
			t.Fatalf("want diagnostics, got %v", err)
		}
		t.Log(err)
	}
	if err := a.Validate(ctx(t), json.RawMessage(`{"file": "web.json"}`)); err == nil {
		t.Fatal("properties without an address validated")
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("a refused authorization wrote %v (%v)", entries, err)
	}
}

// TestConcurrent: two authorizers on one directory (two processes' worth of
// locks: each change opens the lock file anew) authorize and revoke at
// once into two files; nothing is lost.
func TestConcurrent(t *testing.T) {
	a, _ := newAuthorizer(t)
	b, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	want := map[string]string{} // id -> source
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	for i := range 20 {
		for j, x := range []*Authorizer{a, b} {
			wg.Go(func() {
				src := fmt.Sprintf("m%d-%02d", j, i)
				id, err := x.Authorize(ctx(t), member(src, fmt.Sprintf("f%d.json", i%2), fmt.Sprintf("127.0.0.%d:%d", j+1, 1000+i), ""))
				if err != nil {
					errs <- err
					return
				}
				if i%4 == 0 { // the other one revokes every fourth
					errs <- []*Authorizer{b, a}[j].Revoke(ctx(t), id)
					return
				}
				mu.Lock()
				want[id] = src
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
	got := describe(t, a)
	if len(got) != len(want) || len(want) != 30 {
		t.Fatalf("described %d, made %d (want 30)", len(got), len(want))
	}
	for _, x := range got {
		if want[x.ID] != string(x.SourceID) {
			t.Errorf("authorization %s for %s was not made, or was revoked", x.ID, x.SourceID)
		}
	}
}
