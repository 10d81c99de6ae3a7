package providertest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

func (s *suite) testFlavor(t *testing.T, typ string, c FlavorCase) {
	p := s.client.Flavor(typ)
	if err := jsonObject(c.Valid); err != nil {
		t.Fatalf("Config.Flavor[%q].Valid: %v", typ, err)
	}
	t.Run("Validate", func(t *testing.T) {
		s.testValidate(t, func(ctx context.Context, props json.RawMessage) error {
			return p.Validate(ctx, props, c.Allocation)
		}, c.Valid, c.Invalid)
	})
	t.Run("Lifecycle", func(t *testing.T) { s.testFlavorLifecycle(t, p, c) })
}

// testFlavorLifecycle prepares a spec as the group controller does, then asks
// for health and drains what was (or could have been) provisioned from it.
func (s *suite) testFlavorLifecycle(t *testing.T, p flavor.Plugin, c FlavorCase) {
	tags := s.tags()
	in := instance.Spec{
		Properties: json.RawMessage(`{}`),
		Tags:       tags,
		Init:       "echo providertest-" + tags[TagCase],
		// Another flavor's attachment, which this one must keep.
		Attachments: []instance.Attachment{{ID: "providertest-" + tags[TagCase], Type: "providertest"}},
	}
	if c.Instance != "" {
		ic, ok := s.cfg.Instance[c.Instance]
		if !ok {
			t.Fatalf("flavor case provisions with instance type %q, which has no instance case", c.Instance)
		}
		in.Properties = ic.Valid
	}
	if len(c.Allocation.LogicalIDs) > 0 {
		lid := c.Allocation.LogicalIDs[0]
		in.LogicalID = &lid
	}

	ctx, cancel := s.ctx(t)
	defer cancel()
	out, err := p.Prepare(ctx, c.Valid, in, c.Allocation, flavor.Index{Group: "providertest", Sequence: 1})
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if err := checkPrepared(in, out); err != nil {
		t.Error(err)
	}

	desc := instance.Description{
		ID:        instance.ID("providertest-" + tags[TagCase]),
		LogicalID: out.LogicalID,
		Tags:      out.Tags,
		State:     instance.StateRunning,
	}
	if c.Instance != "" {
		ip := s.client.Instance(c.Instance)
		id := s.provision(t, ip, out)
		found := findInstance(s.describe(t, ip, tags, false), id)
		if len(found) != 1 {
			t.Fatalf("instance %q provisioned from the prepared spec is listed %d times, want once", id, len(found))
		}
		desc = found[0]
	}

	h, err := p.Healthy(ctx, c.Valid, desc)
	if err != nil {
		t.Errorf("healthy %q: %v", desc.ID, err)
	}
	switch h {
	case flavor.HealthHealthy, flavor.HealthUnhealthy, flavor.HealthUnknown:
	default:
		t.Errorf("healthy %q = %q, want %q, %q or %q", desc.ID, h, flavor.HealthHealthy, flavor.HealthUnhealthy, flavor.HealthUnknown)
	}
	checkBatch(ctx, t, p, c, desc)
	if err := p.Drain(ctx, c.Valid, desc); err != nil {
		t.Errorf("drain %q: %v", desc.ID, err)
	}
}

// largeBatch is more instances than the host sends in one HealthyBatch
// call, so the batch path is exercised across calls.
const largeBatch = 2500

// checkBatch asks for health in batches, as `infrakit watch` does on every
// pass (flavor.BatchHealthChecker, which the SDK's client implements for
// every provider: HealthyBatch calls, answered by the flavor's HealthyAll
// or by Healthy per instance inside the provider): one answer per
// instance, in order, each healthy, unhealthy or unknown, for the real
// instance and for instances the provider never heard of (which it must
// judge without failing, as Healthy does).
func checkBatch(ctx context.Context, t *testing.T, p flavor.Plugin, c FlavorCase, desc instance.Description) {
	t.Helper()
	b, ok := p.(flavor.BatchHealthChecker)
	if !ok {
		t.Fatalf("the host's flavor adapter %T is not a flavor.BatchHealthChecker", p)
	}
	absent := func(i int) instance.Description {
		d := desc
		d.ID = instance.ID(fmt.Sprintf("%s-absent-%d", desc.ID, i))
		d.LogicalID = nil
		return d
	}
	valid := func(h flavor.Health) bool {
		return h == flavor.HealthHealthy || h == flavor.HealthUnhealthy || h == flavor.HealthUnknown
	}
	hs, err := b.HealthyAll(ctx, c.Valid, []instance.Description{desc, absent(0), desc})
	switch {
	case err != nil:
		t.Errorf("healthy batch of %q and an absent instance: %v", desc.ID, err)
	case len(hs) != 3:
		t.Errorf("healthy batch of 3 instances returned %d healths", len(hs))
	default:
		for i, h := range hs {
			if !valid(h) {
				t.Errorf("healthy batch: instance %d is %q, want %q, %q or %q", i, h, flavor.HealthHealthy, flavor.HealthUnhealthy, flavor.HealthUnknown)
			}
		}
	}
	if hs, err := b.HealthyAll(ctx, c.Valid, nil); err != nil || len(hs) != 0 {
		t.Errorf("healthy batch of no instances = %v, %v; want none", hs, err)
	}
	large := make([]instance.Description, largeBatch)
	for i := range large {
		large[i] = absent(i + 1)
	}
	hs, err = b.HealthyAll(ctx, c.Valid, large)
	if err != nil || len(hs) != largeBatch {
		t.Errorf("healthy batch of %d absent instances: %d healths, %v", largeBatch, len(hs), err)
		return
	}
	for i, h := range hs {
		if !valid(h) {
			t.Errorf("healthy batch of %d: instance %d is %q", largeBatch, i, h)
			break
		}
	}
}

// checkPrepared judges what Prepare made of in: it adds to the spec and
// never loses what the core put there.
func checkPrepared(in, out instance.Spec) error {
	if miss, ok := containsTags(out.Tags, in.Tags); !ok {
		return fmt.Errorf("prepared spec lacks tag %s of the input spec", miss)
	}
	if !strings.Contains(out.Init, in.Init) {
		return fmt.Errorf("prepared init %q does not contain the input init %q", out.Init, in.Init)
	}
	if in.LogicalID != nil && (out.LogicalID == nil || *out.LogicalID != *in.LogicalID) {
		return fmt.Errorf("prepared spec lost logical ID %q", *in.LogicalID)
	}
	if len(out.Properties) == 0 {
		return fmt.Errorf("prepared spec lost the instance properties %s", in.Properties)
	}
	if eq, err := jsonEqual(in.Properties, out.Properties); err != nil || !eq {
		return fmt.Errorf("prepared spec changed the instance properties from %s to %s (%v)", in.Properties, out.Properties, err)
	}
	for _, a := range in.Attachments {
		if !containsAttachment(out.Attachments, a) {
			return fmt.Errorf("prepared spec lost attachment %+v", a)
		}
	}
	return nil
}

func containsAttachment(as []instance.Attachment, a instance.Attachment) bool {
	for _, b := range as {
		if a == b {
			return true
		}
	}
	return false
}
