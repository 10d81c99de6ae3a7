package e2e

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

// minersStack is one cattle group of five over the shipped providers.
const minersStack = `
stack "lifecycle" {}

provider "simulator" {}
provider "vanilla" {}

group "miners" {
  size = 5
  tags = { project = "e2e" }
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = "custom field for miners" }
  }
  flavor {
    provider   = vanilla
    properties = { init = ["echo mine"], tags = { tier = "miners" } }
  }
}
`

// planAfter runs `plan -json` and returns how many members the group will
// have after apply.
func (w *workdir) planAfter(group string) int {
	w.t.Helper()
	res := w.ok("plan", "-json")
	var p planJSON
	if err := json.Unmarshal([]byte(res.stdout), &p); err != nil {
		w.t.Fatalf("plan -json: %v\n%s", err, res)
	}
	for _, g := range p.Groups {
		if g.Group == group {
			return g.After
		}
	}
	w.t.Fatalf("plan -json has no group %q:\n%s", group, res)
	return 0
}

// applyConverges runs plan -detailed-exitcode (2: changes), apply, and plan
// -detailed-exitcode again (0: nothing left), and checks that the group
// ends with the planned number of members both in `group ls` and in the
// simulator's files.
func (w *workdir) applyConverges(group string) {
	w.t.Helper()
	w.expect(2, "plan", "-detailed-exitcode")
	want := w.planAfter(group)
	w.ok("apply", "-auto-approve")
	w.expect(0, "plan", "-detailed-exitcode")
	w.checkCount(group, want)
}

// checkCount checks that group ls and the simulator both hold n members.
func (w *workdir) checkCount(group string, n int) groupJSON {
	w.t.Helper()
	g := w.groups()[group]
	if len(g.Instances) != n {
		w.t.Fatalf("group ls: %s has %d instances, want %d", group, len(g.Instances), n)
	}
	if files := w.simulatorInstances("compute"); !slices.Equal(files, g.ids()) {
		w.t.Fatalf("simulator holds %d instances %q; group ls says %q", len(files), files, g.ids())
	}
	return g
}

// TestGroupsLifecycle is issue 3's walk through the real binaries: apply 5,
// scale to 10, destroy 2 chosen instances, free the group (the provider is
// untouched), apply again (management resumes), destroy everything.
func TestGroupsLifecycle(t *testing.T) {
	w := newWorkdir(t)
	w.writeFile("main.hcl", minersStack)
	w.init()

	// apply 5
	w.applyConverges("miners")
	g := w.checkCount("miners", 5)
	if g.Size == nil || *g.Size != 5 || g.Freed {
		t.Fatalf("after apply: size %v freed %v, want 5 and managed", g.Size, g.Freed)
	}
	for _, inst := range g.Instances {
		for k, v := range map[string]string{
			"project": "e2e", "tier": "miners", "infrakit.stack": "lifecycle", "infrakit.group": "miners",
		} {
			if inst.Tags[k] != v {
				t.Errorf("instance %s: tag %s = %q, want %q (tags %v)", inst.ID, k, inst.Tags[k], v, inst.Tags)
			}
		}
		if inst.Tags["infrakit.config.hash"] == "" || inst.LogicalID != nil || inst.State == "" || inst.Health == "" {
			t.Errorf("instance %+v: want a config hash, no logical ID, a state and a health", inst)
		}
	}

	// scale to 10: the command prints the size, then sets it and converges.
	if res := w.ok("group", "scale", "miners"); strings.TrimSpace(res.stdout) != "5" {
		t.Fatalf("group scale miners printed %q, want 5", res.stdout)
	}
	w.ok("group", "scale", "miners", "10")
	w.checkCount("miners", 10)
	if res := w.ok("group", "scale", "miners"); strings.TrimSpace(res.stdout) != "10" {
		t.Fatalf("after scaling, group scale miners printed %q, want 10", res.stdout)
	}

	// destroy 2 chosen instances: 8 are left, and the group does not grow back.
	ids := w.groups()["miners"].ids()
	victims := ids[3:5]
	w.ok("group", "destroy-instances", "miners", victims[0], victims[1])
	g = w.checkCount("miners", 8)
	for _, v := range victims {
		if slices.Contains(g.ids(), v) {
			t.Fatalf("destroyed instance %s is still there", v)
		}
	}
	if res := w.ok("group", "scale", "miners"); strings.TrimSpace(res.stdout) != "8" {
		t.Errorf("after destroy-instances the size is %q, want 8", res.stdout)
	}

	// free: the provider is untouched, and plan offers to resume.
	before := w.fileStamps("compute")
	w.ok("group", "free", "miners")
	if !w.groups()["miners"].Freed {
		t.Fatalf("group ls does not show miners as freed")
	}
	if action := w.plan()["miners"]; action != "resume" {
		t.Fatalf("plan after free: miners %q, want resume", action)
	}
	if res := w.ok("plan"); !strings.Contains(res.stdout, "is free and will be managed again") {
		t.Errorf("plan after free does not say the group resumes:\n%s", res)
	}
	// Every verb that would act on the freed group refuses it the same way.
	refusal := `group "miners" is free (not managed): run "infrakit apply" to manage it again, or "infrakit group destroy miners" to destroy it`
	for _, verb := range [][]string{
		{"group", "scale", "miners", "3"},
		{"group", "destroy-instances", "miners", g.ids()[0]},
		{"group", "stop-update", "miners"},
	} {
		if res := w.expect(1, verb...); !strings.Contains(res.stderr, refusal) {
			t.Errorf("%s on a freed group: stderr lacks %q\n%s", strings.Join(verb[:2], " "), refusal, res)
		}
	}
	if after := w.fileStamps("compute"); !maps.Equal(before, after) {
		t.Fatalf("free, plan or a refused verb touched the provider's instances:\nbefore %v\nafter  %v", before, after)
	}

	// apply resumes management.
	w.applyConverges("miners")
	if g := w.groups()["miners"]; g.Freed {
		t.Fatalf("after apply miners is still freed")
	}

	// destroy leaves nothing in the provider.
	w.ok("destroy", "-auto-approve")
	if files := w.simulatorInstances("compute"); len(files) != 0 {
		t.Fatalf("after destroy the simulator still holds %q", files)
	}
	if g, ok := w.groups()["miners"]; ok && len(g.Instances) != 0 {
		t.Fatalf("after destroy group ls shows %d instances", len(g.Instances))
	}
	// The stack still declares miners: a plan would create it again.
	w.expect(2, "plan", "-detailed-exitcode")
}

// TestPetsApply: a group of logical IDs gets exactly one instance per ID,
// tagged with it, and a second apply changes nothing.
func TestPetsApply(t *testing.T) {
	w := newWorkdir(t)
	w.copyStack("testdata/pets")
	w.init()
	w.expect(2, "plan", "-detailed-exitcode")
	w.ok("apply", "-auto-approve")
	w.expect(0, "plan", "-detailed-exitcode")

	g := w.checkCount("databases", 3)
	var pets []string
	for _, inst := range g.Instances {
		if inst.LogicalID == nil {
			t.Fatalf("instance %s has no logical ID", inst.ID)
		}
		pets = append(pets, *inst.LogicalID)
		if inst.Tags["infrakit.logical_id"] != *inst.LogicalID || inst.Tags["role"] != "db" {
			t.Errorf("instance %s (%s): tags %v, want infrakit.logical_id and role=db", inst.ID, *inst.LogicalID, inst.Tags)
		}
	}
	slices.Sort(pets)
	if !slices.Equal(pets, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}) {
		t.Fatalf("logical IDs %q, want one instance each of 10.0.0.1-3", pets)
	}
	if res := w.ok("group", "describe", "databases"); !strings.Contains(res.stdout, "10.0.0.2") {
		t.Errorf("group describe does not show the logical IDs:\n%s", res)
	}

	// Destroying a pet's instance does not drop the pet: apply brings it back.
	w.ok("group", "destroy-instances", "databases", g.Instances[0].ID)
	w.checkCount("databases", 2)
	w.applyConverges("databases")
	w.checkCount("databases", 3)
}
