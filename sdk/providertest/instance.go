package providertest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/infrakit/infrakit/sdk/instance"
)

// concurrentProvisions is how many Provision calls the Concurrency test
// makes at once: more than the core's default parallelism (10).
const concurrentProvisions = 20

func (s *suite) testInstance(t *testing.T, typ string, c InstanceCase) {
	p := s.client.Instance(typ)
	if err := jsonObject(c.Valid); err != nil {
		t.Fatalf("Config.Instance[%q].Valid: %v", typ, err)
	}
	t.Run("Validate", func(t *testing.T) { s.testValidate(t, p.Validate, c.Valid, c.Invalid) })
	t.Run("Lifecycle", func(t *testing.T) { s.testInstanceLifecycle(t, p, c) })
	t.Run("DestroyUnknown", func(t *testing.T) {
		ctx, cancel := s.ctx(t)
		defer cancel()
		id := instance.ID("providertest-unknown-" + randomID())
		if err := p.Destroy(ctx, id, instance.ReasonTerminate); err != nil {
			t.Errorf("destroying an instance that does not exist must not be an error (it is already gone): %v", err)
		}
	})
	t.Run("Watch", func(t *testing.T) { s.testInstanceWatch(t, p, c) })
	t.Run("Concurrency", func(t *testing.T) { s.testInstanceConcurrency(t, p, c) })
}

// testValidate checks that validate accepts valid and rejects each invalid
// case with a diagnostic at its path.
func (s *suite) testValidate(t *testing.T, validate func(context.Context, json.RawMessage) error, valid json.RawMessage, invalid []Invalid) {
	ctx, cancel := s.ctx(t)
	defer cancel()
	if err := validate(ctx, valid); err != nil {
		t.Errorf("valid properties %s: %v", valid, err)
	}
	for _, inv := range invalid {
		if err := checkDiagnostics(validate(ctx, inv.Properties), inv.Path); err != nil {
			t.Errorf("invalid properties %s: %v", inv.Properties, err)
		}
	}
}

// testInstanceLifecycle walks one pet through provision, describe, label and
// destroy, checking after each step what a describe by its tags shows.
func (s *suite) testInstanceLifecycle(t *testing.T, p instance.Plugin, c InstanceCase) {
	tags := s.tags()
	lid := instance.LogicalID("providertest-" + tags[TagCase])
	spec := instance.Spec{Properties: c.Valid, Tags: tags, Init: "echo providertest", LogicalID: &lid}
	id, made := s.provisionDescribed(t, p, spec)

	ds := s.describe(t, p, tags, false)
	if err := checkDescribed(ds, id, spec); err != nil {
		t.Fatal(err)
	}
	if len(ds[0].Properties) != 0 {
		t.Errorf("describe without properties returned properties %s; they are for withProperties only", ds[0].Properties)
	}

	withProps := findInstance(s.describe(t, p, tags, true), id)
	if len(withProps) != 1 {
		t.Fatalf("describe with properties lists instance %q %d times, want once", id, len(withProps))
	}
	if err := jsonObject(withProps[0].Properties); err != nil {
		t.Errorf("describe with properties: instance %q: %v", id, err)
	}
	if err := checkMadeAsListed(made, withProps[0]); err != nil {
		t.Error(err)
	}

	// Filtering: a subset of the tags matches, a tag it lacks or a tag with
	// another value does not.
	if len(findInstance(s.describe(t, p, map[string]string{TagCase: tags[TagCase]}, false), id)) != 1 {
		t.Errorf("describe by a subset of its tags does not list instance %q", id)
	}
	extra := maps.Clone(tags)
	extra["providertest.absent"] = "x"
	if got := findInstance(s.describe(t, p, extra, false), id); len(got) != 0 {
		t.Errorf("describe by its tags plus providertest.absent=x lists instance %q, which lacks that tag", id)
	}
	other := map[string]string{TagRun: s.run, TagCase: "not-" + tags[TagCase]}
	if got := findInstance(s.describe(t, p, other, false), id); len(got) != 0 {
		t.Errorf("describe by %v lists instance %q tagged %v", other, id, tags)
	}

	// Label merges: the new value wins, the other tags stay.
	for _, v := range []string{"one", "two"} {
		ctx, cancel := s.ctx(t)
		err := p.Label(ctx, id, map[string]string{"providertest.label": v})
		cancel()
		if err != nil {
			t.Fatalf("label %q: %v", id, err)
		}
	}
	labelled := maps.Clone(tags)
	labelled["providertest.label"] = "two"
	got := findInstance(s.describe(t, p, tags, false), id)
	if len(got) != 1 {
		t.Fatalf("after label, describe by its tags lists instance %q %d times, want once", id, len(got))
	}
	if miss, ok := containsTags(got[0].Tags, labelled); !ok {
		t.Errorf("after label, instance %q lacks tag %s; Label merges into the existing tags", id, miss)
	}

	ctx, cancel := s.ctx(t)
	defer cancel()
	if err := p.Destroy(ctx, id, instance.ReasonTerminate); err != nil {
		t.Fatalf("destroy %q: %v", id, err)
	}
	if err := checkGone(s.describe(t, p, tags, false), id); err != nil {
		t.Error(err)
	}
	if err := p.Destroy(ctx, id, instance.ReasonTerminate); err != nil {
		t.Errorf("destroying instance %q again must not be an error (it is already gone): %v", id, err)
	}
}

// testInstanceWatch checks that a Watch by tags reports a provision and a
// destroy within EventTimeout, and closes its channel when its context ends.
func (s *suite) testInstanceWatch(t *testing.T, p instance.Plugin, c InstanceCase) {
	w, ok := p.(instance.Watcher)
	if !ok {
		t.Skip("the client's instance plugin does not implement instance.Watcher")
	}
	tags := s.tags()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, err := w.Watch(ctx, tags)
	if watchUnsupported(err) {
		t.Skipf("provider does not serve Watch: %v", err)
	}
	if err != nil {
		t.Fatalf("watch: %v", err)
	}

	id := s.provision(t, p, instance.Spec{Properties: c.Valid, Tags: tags})
	s.awaitEvent(t, events, tags, "the provision", func(e instance.Event) bool {
		return e.ID == id && e.Type == instance.EventChanged
	})

	dctx, dcancel := s.ctx(t)
	defer dcancel()
	if err := p.Destroy(dctx, id, instance.ReasonTerminate); err != nil {
		t.Fatalf("destroy %q: %v", id, err)
	}
	s.awaitEvent(t, events, tags, "the destroy", func(e instance.Event) bool {
		return e.ID == id && (e.Type == instance.EventGone ||
			e.Type == instance.EventChanged && e.Instance.State == instance.StateTerminating)
	})

	cancel()
	deadline := time.NewTimer(s.cfg.EventTimeout)
	defer deadline.Stop()
	for {
		select {
		case _, open := <-events:
			if !open {
				return
			}
		case <-deadline.C:
			t.Fatalf("the watch channel is still open %v after its context ended", s.cfg.EventTimeout)
		}
	}
}

// awaitEvent reads events until match, failing t when an event breaks the
// Watch contract or none matches within EventTimeout.
func (s *suite) awaitEvent(t *testing.T, events <-chan instance.Event, tags map[string]string, what string, match func(instance.Event) bool) {
	t.Helper()
	deadline := time.NewTimer(s.cfg.EventTimeout)
	defer deadline.Stop()
	for {
		select {
		case e, open := <-events:
			if !open {
				t.Fatalf("the watch channel closed before reporting %s", what)
			}
			if err := checkEvent(e, tags); err != nil {
				t.Fatal(err)
			}
			if match(e) {
				return
			}
		case <-deadline.C:
			t.Fatalf("watch did not report %s within %v", what, s.cfg.EventTimeout)
		}
	}
}

// checkEvent judges one event of a Watch by tags.
func checkEvent(e instance.Event, tags map[string]string) error {
	switch e.Type {
	case instance.EventGone:
		if e.ID == "" {
			return fmt.Errorf("gone event without an ID")
		}
	case instance.EventChanged:
		if e.Instance == nil {
			return fmt.Errorf("changed event for %q without the instance", e.ID)
		}
		if e.Instance.ID != e.ID {
			return fmt.Errorf("changed event for %q describes instance %q", e.ID, e.Instance.ID)
		}
		if miss, ok := containsTags(e.Instance.Tags, tags); !ok {
			return fmt.Errorf("watch by tags %v reported instance %q, which lacks %s", tags, e.ID, miss)
		}
	default:
		return fmt.Errorf("event for %q has unknown type %q", e.ID, e.Type)
	}
	return nil
}

// testInstanceConcurrency provisions many instances at once, as the core
// does when a group grows, and checks each got its own ID and all are listed.
func (s *suite) testInstanceConcurrency(t *testing.T, p instance.Plugin, c InstanceCase) {
	tags := s.tags()
	spec := instance.Spec{Properties: c.Valid, Tags: tags}
	got := make([]instance.ID, concurrentProvisions)
	errs := make([]error, concurrentProvisions)
	// The provisions contend for one provider and what it drives (a
	// Docker daemon that other tests use too), so the batch is bounded by
	// a call's Timeout per four of them, not by one call's: two test runs
	// side by side took 37 s for 20 containers.
	ctx, cancel := context.WithTimeout(t.Context(), s.cfg.Timeout*concurrentProvisions/4)
	defer cancel()
	var wg sync.WaitGroup
	for i := range concurrentProvisions {
		wg.Go(func() { got[i], errs[i] = p.Provision(ctx, spec) })
	}
	wg.Wait()

	var provisioned []instance.ID
	for i, id := range got {
		if errs[i] != nil {
			t.Errorf("provision %d of %d: %v", i+1, concurrentProvisions, errs[i])
		} else if id == "" {
			t.Errorf("provision %d of %d returned an empty ID", i+1, concurrentProvisions)
		} else {
			provisioned = append(provisioned, id)
		}
	}
	t.Cleanup(func() { s.destroyAll(t, p, provisioned) })
	if t.Failed() {
		t.FailNow()
	}

	slices.Sort(provisioned)
	if d := slices.Compact(slices.Clone(provisioned)); len(d) != len(provisioned) {
		t.Fatalf("%d concurrent provisions returned only %d distinct IDs: %v", concurrentProvisions, len(d), provisioned)
	}
	described := ids(s.describe(t, p, tags, false))
	slices.Sort(described)
	if !slices.Equal(described, provisioned) {
		t.Fatalf("after %d concurrent provisions, describe by their tags lists %v, want %v", concurrentProvisions, described, provisioned)
	}

	if err := s.destroyAll(t, p, provisioned); err != nil {
		t.Fatal(err)
	}
	ds := s.describe(t, p, tags, false)
	for _, id := range provisioned {
		if err := checkGone(ds, id); err != nil {
			t.Error(err)
		}
	}
}

// destroyAll destroys ids concurrently and returns the first error.
func (s *suite) destroyAll(t *testing.T, p instance.Plugin, ids []instance.ID) error {
	ctx, cancel := s.cleanupCtx()
	defer cancel()
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			if err := p.Destroy(ctx, id, instance.ReasonTerminate); err != nil {
				errs[i] = fmt.Errorf("destroy %q: %w", id, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// provision provisions spec and destroys the instance when t ends, even if
// the test already did (destroying a gone instance is not an error).
func (s *suite) provision(t *testing.T, p instance.Plugin, spec instance.Spec) instance.ID {
	t.Helper()
	ctx, cancel := s.ctx(t)
	defer cancel()
	id, err := p.Provision(ctx, spec)
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	if id == "" {
		t.Fatal("provision returned an empty ID")
	}
	t.Cleanup(func() {
		ctx, cancel := s.cleanupCtx()
		defer cancel()
		if err := p.Destroy(ctx, id, instance.ReasonTerminate); err != nil {
			t.Errorf("cleanup: destroy %q: %v", id, err)
		}
	})
	return id
}

// provisionDescribed is provision through ProvisionDescribed when p has
// it, returning the description too (only an ID when p has not, or
// described nothing).
func (s *suite) provisionDescribed(t *testing.T, p instance.Plugin, spec instance.Spec) (instance.ID, instance.Description) {
	t.Helper()
	dp, ok := p.(instance.DescribingProvisioner)
	if !ok {
		id := s.provision(t, p, spec)
		return id, instance.Description{ID: id}
	}
	ctx, cancel := s.ctx(t)
	defer cancel()
	d, err := dp.ProvisionDescribed(ctx, spec)
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	if d.ID == "" {
		t.Fatal("provision returned an empty ID")
	}
	t.Cleanup(func() {
		ctx, cancel := s.cleanupCtx()
		defer cancel()
		if err := p.Destroy(ctx, d.ID, instance.ReasonTerminate); err != nil {
			t.Errorf("cleanup: destroy %q: %v", d.ID, err)
		}
	})
	return d.ID, d
}

func (s *suite) describe(t *testing.T, p instance.Plugin, tags map[string]string, withProperties bool) []instance.Description {
	t.Helper()
	ctx, cancel := s.ctx(t)
	defer cancel()
	ds, err := p.DescribeInstances(ctx, tags, withProperties)
	if err != nil {
		t.Fatalf("describe %v: %v", tags, err)
	}
	return ds
}
