package group

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/plugin"
)

func TestNewInstancesChecks(t *testing.T) {
	s := newSim(t)
	g := cattleGroup("web", 2, `{}`)
	ip := s.client.Instance("compute")
	one := []Flavor{{Plugin: s.client.Flavor("simulator")}}
	for _, tc := range []struct {
		name    string
		g       *config.Group
		plugins Plugins
		want    string
	}{
		{"nil group", nil, Plugins{Instance: ip, Flavors: one}, "nil group"},
		{"no instance plugin", g, Plugins{Flavors: one}, `group "web": no instance plugin`},
		{"a plugin per flavor block", g, Plugins{Instance: ip, Flavors: append(one, one...)}, "2 flavor plugins for 1 flavor blocks"},
		{"nil flavor plugin", g, Plugins{Instance: ip, Flavors: []Flavor{{}}}, "flavor 1 has no plugin"},
	} {
		if _, err := NewInstances(tc.g, tc.plugins, Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewInstances error %v, want one with %q", tc.name, err, tc.want)
		}
	}

	c := newInstances(t, s, g, Options{})
	if c.Name() != "web" || !reflect.DeepEqual(c.Desired(), DesiredFromConfig(g)) {
		t.Fatalf("Name %q, Desired %+v", c.Name(), c.Desired())
	}
	// The group is copied in and out: neither the caller's edits nor the
	// reader's reach it.
	*g.Size = 7
	got := c.Group()
	*got.Size = 9
	got.Flavors[0].Type = "changed"
	if again := c.Group(); *again.Size != 2 || again.Flavors[0].Type != "simulator" {
		t.Fatalf("the group changed from outside: size %d, flavor %q", *again.Size, again.Flavors[0].Type)
	}
}

// Provisioned cattle carry the group's tags, the flavor's (which win) and
// infrakit's own; the member returned is pending, of unknown health, and
// has the group's config hash. Observe lists them by the group's tags.
func TestProvisionTaggedCattle(t *testing.T) {
	s := newSim(t)
	g := cattleGroup("miners", 3, `{"note":"custom"}`)
	c := newInstances(t, s, g, Options{})
	ctx := ctxT(t)
	var made []Member
	for range 3 {
		m, err := c.Provision(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, m)
	}
	hash := g.ConfigHash()
	for _, m := range made {
		if m.ID == "" || m.LogicalID != "" || m.ConfigHash != hash || m.State != instance.StatePending || m.Health != flavor.HealthUnknown {
			t.Errorf("Provision returned %+v", m)
		}
	}
	// Another group of the stack on the same provider is not listed.
	other := newInstances(t, s, cattleGroup("other", 1, `{}`), Options{})
	provision(t, other, 1)

	all := s.all(t)
	if len(all) != 4 {
		t.Fatalf("simulator holds %d instances, want 4", len(all))
	}
	for _, d := range all {
		if d.Tags[tags.Group] != "miners" {
			continue
		}
		want := map[string]string{
			"project": "test", "tier": "flavor", // the flavor's tag wins over the user's
			tags.Stack: "teststack", tags.Group: "miners", tags.ConfigHash: hash,
		}
		for k, v := range want {
			if d.Tags[k] != v {
				t.Errorf("%s: tag %s = %q, want %q (tags %v)", d.ID, k, d.Tags[k], v, d.Tags)
			}
		}
		if _, ok := d.Tags[tags.LogicalID]; ok || d.LogicalID != nil {
			t.Errorf("%s: cattle with a logical ID: %v", d.ID, d.Tags)
		}
		if note := s.record(t, d.ID)["properties"].(map[string]any)["note"]; note != "custom" {
			t.Errorf("%s: properties note = %v, want the instance properties", d.ID, note)
		}
	}

	members, err := c.Observe(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	var listed []instance.ID
	for _, m := range members {
		listed = append(listed, m.ID)
		if m.ConfigHash != hash || m.State != instance.StateRunning || m.Health != flavor.HealthUnknown || m.Address == "" {
			t.Errorf("observed %+v", m)
		}
	}
	var want []instance.ID
	for _, m := range made {
		want = append(want, m.ID)
	}
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Fatalf("Observe lists %v, want the group's %v", listed, want)
	}
}

// A pet is provisioned with its logical ID, as the spec's LogicalID and a
// tag; the simulator addresses it by it, and Observe reads it back.
func TestProvisionPets(t *testing.T) {
	s := newSim(t)
	g := petGroup("db", `{"disk_gb":100}`, "10.0.0.1", "10.0.0.2")
	c := newInstances(t, s, g, Options{})
	ctx := ctxT(t)
	byID := map[instance.ID]string{}
	for _, lid := range g.LogicalIDs {
		m, err := c.Provision(ctx, lid)
		if err != nil {
			t.Fatal(err)
		}
		if m.LogicalID != lid || m.ConfigHash != g.ConfigHash() || m.State != instance.StatePending {
			t.Fatalf("Provision(%q) = %+v", lid, m)
		}
		byID[m.ID] = lid
	}
	for _, d := range s.all(t) {
		lid := byID[d.ID]
		if d.LogicalID == nil || string(*d.LogicalID) != lid {
			t.Fatalf("%s: logical ID %v, want %q", d.ID, d.LogicalID, lid)
		}
		if d.Tags[tags.LogicalID] != lid || d.Address != lid || d.Tags[tags.Group] != "db" {
			t.Errorf("%s: logical_id tag %q, address %q, tags %v; want %q", d.ID, d.Tags[tags.LogicalID], d.Address, d.Tags, lid)
		}
	}
	members, err := c.Observe(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 2 {
		t.Fatalf("Observe = %+v", members)
	}
	for _, m := range members {
		if m.LogicalID != byID[m.ID] {
			t.Errorf("observed %+v, want logical ID %q", m, byID[m.ID])
		}
	}
	// The pets are the group's: Decide is satisfied with them.
	if dec := Decide(c.Desired(), members); !dec.Empty() {
		t.Errorf("Decide on the provisioned pets = %+v", dec)
	}
}

// The flavors combine in order: each prepares the spec the previous left,
// tags merge (later wins), init lines are concatenated, attachments
// accumulate, and infrakit's own tags come last.
func TestFlavorsCombineInOrder(t *testing.T) {
	s := newSim(t)
	vanilla := startProvider(t, "vanilla", s.dir)
	g := cattleGroup("web", 1, `{}`)
	g.Flavors = []config.Plugin{
		{Provider: "vanilla", Type: "vanilla", Properties: json.RawMessage(
			`{"init":["echo one","echo two"],"tags":{"tier":"first","a":"1"},"attachments":[{"id":"vol-1","type":"volume"}]}`)},
		{Provider: "simulator", Type: "simulator", Properties: json.RawMessage(`{"tags":{"tier":"second","infrakit.group":"hijack"}}`)},
		{Provider: "vanilla", Type: "vanilla", Properties: json.RawMessage(
			`{"init":["echo three"],"tags":{"b":"2"},"attachments":[{"id":"eip-1","type":"address"}]}`)},
	}
	c := newInstances(t, s, g, Options{}, vanilla.Flavor("vanilla"), s.client.Flavor("simulator"), vanilla.Flavor("vanilla"))
	ids := provision(t, c, 1)
	all := s.all(t)
	if len(all) != 1 || all[0].ID != ids[0] {
		t.Fatalf("instances %+v, want %s", all, ids[0])
	}
	got := all[0].Tags
	want := map[string]string{"tier": "second", "a": "1", "b": "2", "project": "test", tags.Group: "web", tags.Stack: "teststack"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("tag %s = %q, want %q: later flavors win, earlier ones are kept, infrakit's own come last (tags %v)", k, got[k], v, got)
		}
	}
	rec := s.record(t, ids[0])
	if rec["init"] != "echo one\necho two\necho three" {
		t.Errorf("init = %q, want the flavors' lines in order", rec["init"])
	}
	b, _ := json.Marshal(rec["attachments"])
	if string(b) != `[{"id":"vol-1","type":"volume"},{"id":"eip-1","type":"address"}]` {
		t.Errorf("attachments = %s, want both flavors' in order", b)
	}
}

// A failed Provision names the group, the pet and the step that failed;
// a flavor that fails to prepare stops it before the instance plugin is
// called.
func TestProvisionFailures(t *testing.T) {
	flaky := newSim(t, "INFRAKIT_SIMULATOR_FAILURE_RATE=1")
	ctx := ctxT(t)
	c := newInstances(t, flaky, cattleGroup("flaky", 1, `{}`), Options{})
	_, err := c.Provision(ctx, "")
	if err == nil || !strings.Contains(err.Error(), `group "flaky": create instance: provision: `) ||
		!strings.Contains(err.Error(), "simulated provision failure") {
		t.Fatalf("Provision on a failing cloud: %v", err)
	}
	pets := newInstances(t, flaky, petGroup("flaky", `{}`, "x"), Options{})
	if _, err := pets.Provision(ctx, "x"); err == nil || !strings.Contains(err.Error(), `group "flaky": create instance for "x": provision: `) {
		t.Fatalf("Provision of a pet on a failing cloud: %v", err)
	}

	s := newSim(t)
	g := cattleGroup("web", 1, `{}`)
	g.Flavors = append(g.Flavors, config.Plugin{Provider: "simulator", Type: "simulator", Properties: json.RawMessage(`{"tags":5}`)})
	c = newInstances(t, s, g, Options{})
	if _, err := c.Provision(ctx, ""); err == nil || !strings.Contains(err.Error(), `group "web": create instance: flavor 2: prepare: `) {
		t.Fatalf("Provision with a flavor that cannot prepare: %v", err)
	}
	if n := len(s.all(t)); n != 0 {
		t.Fatalf("%d instances provisioned although a flavor failed", n)
	}
}

// Drain asks every flavor in order, with the member's description as last
// listed; Destroy then removes it. A drain that fails is returned naming
// the flavor, the flavors after it are not asked, and the member is left
// as it is.
func TestDrainThenDestroy(t *testing.T) {
	s := newSim(t)
	vanilla := startProvider(t, "vanilla", s.dir)
	j := &journal{}
	first := newProbe("simulator", s.client.Flavor("simulator"), j)
	second := newProbe("vanilla", vanilla.Flavor("vanilla"), j)
	g := cattleGroup("web", 2, `{}`)
	g.Flavors = append(g.Flavors, config.Plugin{Provider: "vanilla", Type: "vanilla"})
	c := newInstances(t, s, g, Options{}, first, second)
	ctx := ctxT(t)
	ids := provision(t, c, 2)
	descs, _, err := c.ObserveDescriptions(ctx, false) // the listing drains are made with
	if err != nil {
		t.Fatal(err)
	}
	listed := descs[slices.IndexFunc(descs, func(d instance.Description) bool { return d.ID == ids[0] })]

	if err := c.Drain(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if got, want := j.String(), "simulator "+string(ids[0])+", vanilla "+string(ids[0]); got != want {
		t.Fatalf("drains %s, want %s", got, want)
	}
	for _, p := range []*probe{first, second} {
		d := p.drained[0]
		if d.ID != listed.ID || d.Address != listed.Address || d.State != listed.State || !reflect.DeepEqual(d.Tags, listed.Tags) {
			t.Fatalf("%s drained %+v, want the listed %+v", p.name, d, listed)
		}
	}
	if n := len(s.all(t)); n != 2 {
		t.Fatalf("a drain destroyed: %d instances left", n)
	}
	if err := c.Destroy(ctx, ids[0], ReasonScaleDown); err != nil {
		t.Fatal(err)
	}
	if left := liveIDs(t, c); !slices.Equal(left, ids[1:]) {
		t.Fatalf("after the destroy %v, want %v", left, ids[1:])
	}

	// A member the last listing does not have is drained by its ID alone.
	first.reset()
	if err := c.Drain(ctx, "compute-unlisted"); err != nil {
		t.Fatal(err)
	}
	if d := first.drained; len(d) != 1 || !reflect.DeepEqual(d[0], instance.Description{ID: "compute-unlisted"}) {
		t.Fatalf("drained %+v, want the bare ID", d)
	}

	// The second flavor's provider dies: the drain fails at it.
	vanilla.Kill()
	first.reset()
	second.reset()
	err = c.Drain(ctx, ids[1])
	if err == nil || !errors.Is(err, plugin.ErrUnavailable) ||
		!strings.Contains(err.Error(), `group "web": drain `+string(ids[1])+`: flavor 2: `) {
		t.Fatalf("drain through a dead flavor: %v", err)
	}
	if len(first.drained) != 1 {
		t.Fatalf("the first flavor was asked %d times, want once", len(first.drained))
	}
	// With the dead flavor first, the second is never asked.
	c2 := newInstances(t, s, g, Options{}, second, first)
	first.reset()
	if err := c2.Drain(ctx, ids[1]); err == nil || !strings.Contains(err.Error(), "flavor 1: ") {
		t.Fatalf("drain through a dead first flavor: %v", err)
	}
	if len(first.drained) != 0 {
		t.Fatalf("a flavor after a failed drain was asked: %+v", first.drained)
	}
	if left := liveIDs(t, c); !slices.Equal(left, ids[1:]) {
		t.Fatalf("after the failed drains %v, want %v untouched", left, ids[1:])
	}
}

// Observe, Provision and Destroy against a provider that died name the
// group and wrap plugin.ErrUnavailable.
func TestInstancePluginUnavailable(t *testing.T) {
	s := newSim(t)
	c := newInstances(t, s, cattleGroup("web", 1, `{}`), Options{})
	ctx := ctxT(t)
	ids := provision(t, c, 1)
	s.client.Kill()
	if _, err := c.Observe(ctx, true); err == nil || !errors.Is(err, plugin.ErrUnavailable) || !strings.Contains(err.Error(), `group "web": describe instances: `) {
		t.Errorf("Observe: %v", err)
	}
	if _, err := c.Provision(ctx, ""); err == nil || !errors.Is(err, plugin.ErrUnavailable) || !strings.Contains(err.Error(), `group "web": create instance: `) {
		t.Errorf("Provision: %v", err)
	}
	if err := c.Destroy(ctx, ids[0], ReasonScaleDown); err == nil || !errors.Is(err, plugin.ErrUnavailable) ||
		!strings.Contains(err.Error(), `group "web": destroy `+string(ids[0])+": ") {
		t.Errorf("Destroy: %v", err)
	}
}
