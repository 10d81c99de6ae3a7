package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infrakit/infrakit/plugins/docker/engine"
	"github.com/infrakit/infrakit/sdk/instance"
)

// provision provisions a web container with tags and destroys it when the
// test ends.
func provision(t *testing.T, p *Provider, tags map[string]string) instance.ID {
	t.Helper()
	return provisionProps(t, p, tags, webProps())
}

// provisionProps provisions a container with tags and props and destroys it
// when the test ends.
func provisionProps(t *testing.T, p *Provider, tags map[string]string, props []byte) instance.ID {
	t.Helper()
	id, err := p.Provision(t.Context(), instance.Spec{Properties: props, Tags: tags})
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Destroy(ctx, id, instance.ReasonTerminate); err != nil {
			t.Errorf("cleanup: destroy %s: %v", id, err)
		}
	})
	return id
}

func list(t *testing.T, p *Provider, tags map[string]string) []instance.Description {
	t.Helper()
	ds, err := p.DescribeInstances(t.Context(), tags, false)
	if err != nil {
		t.Fatalf("describe %v: %v", tags, err)
	}
	return ds
}

func idsOf(ds []instance.Description) []instance.ID {
	out := make([]instance.ID, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	slices.Sort(out)
	return out
}

// get fetches url once with a short timeout.
func get(url string) (string, error) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

// serving waits until GET http://addr/ answers, and returns the answer.
func serving(t *testing.T, addr string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		body, err := get("http://" + addr + "/")
		if err == nil {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer within %v: %v", addr, within, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A group of three: provisioned concurrently, described by its tags in one
// list call as three running containers with IPs, each serving on its
// Address; then destroyed, leaving nothing.
func TestGroupOfThree(t *testing.T) {
	needDocker(t)
	px := newProxy(t)
	p := newProvider(t, px.host())
	tags := testTags(t, "infrakit.stack", "dockertest", "infrakit.group", "web")
	removeOnCleanup(t, tags)

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ids  []instance.ID
		errs []error
		took []time.Duration
	)
	for range 3 {
		wg.Go(func() {
			start := time.Now()
			id, err := p.Provision(t.Context(), instance.Spec{Properties: webProps(), Tags: tags})
			mu.Lock()
			defer mu.Unlock()
			took = append(took, time.Since(start))
			if err != nil {
				errs = append(errs, err)
				return
			}
			ids = append(ids, id)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	t.Logf("3 concurrent provisions took %v", took)

	px.take()
	ds := list(t, p, tags)
	if calls := px.take(); !maps.Equal(calls, map[string]int{"GET /containers/json": 1}) {
		t.Errorf("describe made the calls %v; want one list call", calls)
	}
	if got := idsOf(ds); !slices.Equal(got, ids) {
		t.Fatalf("describe by tags lists %v; want the 3 provisioned %v", got, ids)
	}
	for _, d := range ds {
		if d.State != instance.StateRunning {
			t.Errorf("%s: state %q right after Provision; want running", d.ID, d.State)
		}
		host, port, err := net.SplitHostPort(d.Address)
		if err != nil || net.ParseIP(host) == nil || port != "8080" {
			t.Errorf("%s: address %q; want <container IP>:8080", d.ID, d.Address)
			continue
		}
		if !maps.Equal(d.Tags, tags) {
			t.Errorf("%s: tags %v; want %v", d.ID, d.Tags, tags)
		}
		// The container's hostname is its short ID, which the server echoes.
		if body, want := serving(t, d.Address, 5*time.Second), fmt.Sprintf("instance %s port 8080\n", d.ID); body != want {
			t.Errorf("GET http://%s/ = %q; want %q", d.Address, body, want)
		}
	}
	for _, d := range ds {
		if err := p.Destroy(t.Context(), d.ID, instance.ReasonScaleDown); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range list(t, p, tags) {
		if d.State != instance.StateTerminating {
			t.Errorf("after destroy, %s is listed %q", d.ID, d.State)
		}
	}
	list, err := client.ContainerList(t.Context(), engine.Filters{"label": {"dockertest.test=" + tags["dockertest.test"]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("after destroy, %d containers are left", len(list))
	}
}

// TestProvisionToServing measures one container from Provision to running
// (Describe) and to answering HTTP.
func TestProvisionToServing(t *testing.T) {
	needDocker(t)
	p := newProvider(t, "")
	tags := testTags(t)
	removeOnCleanup(t, tags)
	start := time.Now()
	id := provision(t, p, tags)
	provisioned := time.Since(start)
	var d instance.Description
	for {
		ds := list(t, p, tags)
		if len(ds) == 1 && ds[0].State == instance.StateRunning {
			d = ds[0]
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%s is not running 10s after Provision: %+v", id, ds)
		}
	}
	running := time.Since(start)
	serving(t, d.Address, 5*time.Second)
	t.Logf("provision returned after %v, running after %v, serving HTTP after %v", provisioned, running, time.Since(start))

	start = time.Now()
	if err := p.Destroy(t.Context(), id, instance.ReasonTerminate); err != nil {
		t.Fatal(err)
	}
	t.Logf("destroy (SIGTERM, graceful exit, remove) took %v", time.Since(start))
}

// eventDeadline is how long a test waits for an event the provider reports
// "at once": generous, because a shared machine under load can take
// seconds to start or kill a container; the tests log how long it took.
const eventDeadline = 30 * time.Second

// await reads events until match, failing after within.
func await(t *testing.T, events <-chan instance.Event, within time.Duration, what string, match func(instance.Event) bool) instance.Event {
	t.Helper()
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("the watch channel closed before %s", what)
			}
			if match(e) {
				return e
			}
		case <-timeout.C:
			t.Fatalf("no event for %s within %v", what, within)
		}
	}
}

// A container killed behind infrakit's back is reported at once; one
// destroyed is reported gone.
func TestWatchKill(t *testing.T) {
	needDocker(t)
	p := newProvider(t, "")
	tags := testTags(t)
	removeOnCleanup(t, tags)
	ctx, cancel := context.WithCancel(t.Context())
	events, err := p.Watch(ctx, tags)
	if err != nil {
		t.Fatal(err)
	}

	a := provision(t, p, tags)
	await(t, events, eventDeadline, "the provision of "+string(a), func(e instance.Event) bool {
		return e.ID == a && e.Type == instance.EventChanged && e.Instance.State == instance.StateRunning && e.Instance.Address != ""
	})

	start := time.Now()
	if err := client.ContainerKill(t.Context(), string(a), "KILL"); err != nil {
		t.Fatal(err)
	}
	e := await(t, events, eventDeadline, "docker kill "+string(a), func(e instance.Event) bool {
		return e.ID == a && (e.Type == instance.EventGone || e.Instance.State == instance.StateTerminating)
	})
	t.Logf("docker kill → %s event after %v", e.Type, time.Since(start))
	if e.Type != instance.EventGone {
		await(t, events, eventDeadline, "the removal of "+string(a), func(e instance.Event) bool {
			return e.ID == a && e.Type == instance.EventGone
		})
		t.Logf("docker kill → gone (auto-removed) after %v", time.Since(start))
	}

	b := provision(t, p, tags)
	await(t, events, eventDeadline, "the provision of "+string(b), func(e instance.Event) bool {
		return e.ID == b && e.Type == instance.EventChanged && e.Instance.State == instance.StateRunning
	})
	start = time.Now()
	if err := p.Destroy(t.Context(), b, instance.ReasonTerminate); err != nil {
		t.Fatal(err)
	}
	await(t, events, eventDeadline, "the destroy of "+string(b), func(e instance.Event) bool {
		return e.ID == b && e.Type == instance.EventGone
	})
	t.Logf("destroy → gone after %v", time.Since(start))

	cancel()
	closed(t, events)
}

// closed fails t unless events is closed (after draining it) within 5s.
func closed(t *testing.T, events <-chan instance.Event) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("the watch channel is still open 5s after its context ended")
		}
	}
}

// TestWatchReconnect breaks the event stream and refuses to reopen it for
// a while; a container provisioned meanwhile is still reported, from the
// listing made when the stream is back.
func TestWatchReconnect(t *testing.T) {
	needDocker(t)
	px := newProxy(t)
	p := newProvider(t, px.host())
	tags := testTags(t)
	removeOnCleanup(t, tags)
	events, err := p.Watch(t.Context(), tags)
	if err != nil {
		t.Fatal(err)
	}
	px.refuseEvents(true)
	px.cut()
	id := provision(t, p, tags)
	time.Sleep(300 * time.Millisecond) // a few refused reconnects
	px.take()
	px.refuseEvents(false)
	await(t, events, eventDeadline, "the provision made while the stream was down", func(e instance.Event) bool {
		return e.ID == id && e.Type == instance.EventChanged
	})
	if n := px.take()["GET /events"]; n < 1 {
		t.Errorf("the watch did not reopen the stream (%d calls)", n)
	}
	// And the reopened stream works.
	if err := p.Destroy(t.Context(), id, instance.ReasonTerminate); err != nil {
		t.Fatal(err)
	}
	await(t, events, eventDeadline, "the destroy after the reconnect", func(e instance.Event) bool {
		return e.ID == id && e.Type == instance.EventGone
	})
}

// A missing image fails Provision at once with an error naming it; nothing
// is pulled and no container is left.
func TestMissingImage(t *testing.T) {
	needDocker(t)
	p := newProvider(t, "")
	tags := testTags(t)
	removeOnCleanup(t, tags)
	absent := "infrakit-absent-" + randomHex(4) + ":latest"
	start := time.Now()
	_, err := p.Provision(t.Context(), instance.Spec{Properties: fmt.Appendf(nil, `{"image": %q}`, absent), Tags: tags})
	took := time.Since(start)
	var missing *MissingImageError
	if !errors.As(err, &missing) || missing.Image != absent {
		t.Fatalf("provision from an absent image: %v; want a MissingImageError naming %q", err, absent)
	}
	want := fmt.Sprintf("image %q is not present on this Docker host; build or load it first — infrakit never pulls", absent)
	if err.Error() != want {
		t.Errorf("error %q; want %q", err, want)
	}
	if took > 2*time.Second {
		t.Errorf("failing took %v", took)
	}
	if ds := list(t, p, tags); len(ds) != 0 {
		t.Errorf("a failed provision left %v", ds)
	}
	if present, err := client.ImageInspect(t.Context(), absent); err != nil || present {
		t.Errorf("image %s present=%v (%v) after the failed provision: it must not be pulled", absent, present, err)
	}
}

// Describe by tags lists only the provider's containers with every tag:
// not those with other tags, and not a container made by someone else
// that carries the same labels, which Destroy and Label also refuse.
func TestTagsExcludeOthers(t *testing.T) {
	needDocker(t)
	p := newProvider(t, "")
	tags := testTags(t)
	removeOnCleanup(t, tags)
	web := maps.Clone(tags)
	web["infrakit.group"] = "web"
	db := maps.Clone(tags)
	db["infrakit.group"] = "db"
	a := provision(t, p, web)
	b := provision(t, p, db)
	foreign, err := client.ContainerCreate(t.Context(), "", engine.ContainerConfig{Image: image, Labels: web})
	if err != nil {
		t.Fatal(err)
	}

	if got := idsOf(list(t, p, web)); !slices.Equal(got, []instance.ID{a}) {
		t.Errorf("describe %v = %v; want only %s", web, got, a)
	}
	if got, want := idsOf(list(t, p, tags)), idsOf([]instance.Description{{ID: a}, {ID: b}}); !slices.Equal(got, want) {
		t.Errorf("describe %v = %v; want %v", tags, got, want)
	}
	other := maps.Clone(web)
	other["infrakit.group"] = "absent"
	if got := list(t, p, other); len(got) != 0 {
		t.Errorf("describe %v = %v; want none", other, idsOf(got))
	}

	fid := shortID(foreign.ID)
	if err := p.Destroy(t.Context(), fid, instance.ReasonTerminate); err == nil || !strings.Contains(err.Error(), "not made by infrakit") {
		t.Errorf("destroy of a foreign container: %v; want a refusal", err)
	}
	if err := p.Label(t.Context(), fid, map[string]string{"x": "y"}); err == nil {
		t.Error("label of a foreign container: no error")
	}
	if _, err := client.ContainerInspect(t.Context(), foreign.ID); err != nil {
		t.Errorf("the foreign container is gone: %v", err)
	}
	if err := p.Destroy(t.Context(), "0000deadbeef", instance.ReasonTerminate); err != nil {
		t.Errorf("destroy of an unknown ID: %v; want none", err)
	}
}

// Label records what Docker cannot relabel; descriptions, filtering and a
// running watch see it, and Destroy forgets the record.
func TestLabel(t *testing.T) {
	needDocker(t)
	p := newProvider(t, "")
	tags := testTags(t, "tier", "a")
	removeOnCleanup(t, tags)
	id := provision(t, p, tags)
	events, err := p.Watch(t.Context(), map[string]string{"dockertest.test": tags["dockertest.test"]})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Label(t.Context(), id, map[string]string{"tier": "b", "added": "yes"}); err != nil {
		t.Fatal(err)
	}
	e := await(t, events, eventDeadline, "the label", func(e instance.Event) bool { return e.ID == id && e.Type == instance.EventChanged })
	if e.Instance.Tags["tier"] != "b" || e.Instance.Tags["added"] != "yes" {
		t.Errorf("label event tags %v", e.Instance.Tags)
	}
	labelled := maps.Clone(tags)
	labelled["tier"], labelled["added"] = "b", "yes"
	ds := list(t, p, map[string]string{"dockertest.test": tags["dockertest.test"]})
	if len(ds) != 1 || !maps.Equal(ds[0].Tags, labelled) {
		t.Fatalf("after label: %+v; want tags %v", ds, labelled)
	}
	if got := list(t, p, map[string]string{"dockertest.test": tags["dockertest.test"], "tier": "b"}); len(got) != 1 {
		t.Errorf("describe by the new tier finds %d", len(got))
	}
	if got := list(t, p, tags); len(got) != 0 {
		t.Errorf("describe by the old tier finds %v", idsOf(got))
	}
	record := filepath.Join(p.Dir(), string(id)+".json")
	if _, err := os.Stat(record); err != nil {
		t.Errorf("no label record: %v", err)
	}
	// Labelling back to the container's own labels keeps the record right.
	if err := p.Label(t.Context(), id, map[string]string{"tier": "a"}); err != nil {
		t.Fatal(err)
	}
	if got := list(t, p, tags); len(got) != 1 || got[0].Tags["added"] != "yes" {
		t.Errorf("after labelling back: %+v", got)
	}
	// A label of the labels property becomes a tag only through Label.
	withLabel := maps.Clone(tags)
	withLabel["team"] = "edge"
	labelled2 := provisionProps(t, p, tags, fmt.Appendf(nil, `{"image": %q, "labels": {"team": "edge"}}`, image))
	if got := list(t, p, withLabel); len(got) != 0 {
		t.Errorf("describe by a labels property finds %v; it is not a tag", idsOf(got))
	}
	if err := p.Label(t.Context(), labelled2, map[string]string{"team": "edge"}); err != nil {
		t.Fatal(err)
	}
	if got := list(t, p, withLabel); len(got) != 1 || got[0].ID != labelled2 {
		t.Errorf("after Label team=edge, describe by it finds %v; want %s", idsOf(got), labelled2)
	}

	if err := p.Destroy(t.Context(), id, instance.ReasonTerminate); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(record); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("destroy left the label record: %v", err)
	}
	if err := p.Label(t.Context(), id, map[string]string{"x": "y"}); err == nil {
		t.Error("label of a destroyed container: no error")
	}
}

// A container that fails to start (its host port is taken) is removed:
// Provision leaves nothing half made.
func TestStartFailureLeavesNothing(t *testing.T) {
	needDocker(t)
	p := newProvider(t, "")
	tags := testTags(t)
	removeOnCleanup(t, tags)
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	props := fmt.Appendf(nil, `{"image": %q, "ports": ["%d:8080"]}`, image, port)
	_, err = p.Provision(t.Context(), instance.Spec{Properties: props, Tags: tags})
	if err == nil || !strings.Contains(err.Error(), "start container") {
		t.Fatalf("provision publishing a taken port: %v; want a start error", err)
	}
	list, err := client.ContainerList(t.Context(), engine.Filters{"label": {"dockertest.test=" + tags["dockertest.test"]}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("a failed start left %d containers", len(list))
	}
}

// Close ends every watch: their channels close.
func TestCloseEndsWatches(t *testing.T) {
	needDocker(t)
	p := newProvider(t, "")
	events, err := p.Watch(t.Context(), testTags(t))
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	closed(t, events)
	if _, err := p.Watch(t.Context(), testTags(t)); !errors.Is(err, errClosed) {
		t.Errorf("watch after close: %v; want errClosed", err)
	}
}
