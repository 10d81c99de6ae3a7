package command

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mitchellh/cli"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

func TestNewGroupJSON(t *testing.T) {
	five := 5
	tests := []struct {
		name string
		view operation.GroupView
		want string
	}{{
		name: "cattle sorted by id, tags kept, missing tags empty",
		view: operation.GroupView{
			Name: "miners",
			Size: &five,
			Instances: []group.Member{
				{ID: "b", State: instance.StateRunning, Health: flavor.HealthHealthy},
				{ID: "a", State: instance.StatePending, Health: flavor.HealthUnknown, ConfigHash: "h", Address: "10.0.0.9"},
			},
			Tags: map[instance.ID]map[string]string{"a": {"infrakit.group": "miners", "tier": "miners"}},
		},
		want: `{"group":"miners","size":5,"freed":false,"instances":[` +
			`{"id":"a","logical_id":null,"tags":{"infrakit.group":"miners","tier":"miners"},"state":"pending","health":"unknown","address":"10.0.0.9"},` +
			`{"id":"b","logical_id":null,"tags":{},"state":"running","health":"healthy","address":""}],` +
			`"rolling":{"outdated":0,"stopped":false}}`,
	}, {
		name: "a stopped roll: members with another hash are out of date",
		view: operation.GroupView{
			Name: "web", Size: &five, ConfigHash: "new", UpdateStopped: true,
			Instances: []group.Member{
				{ID: "a", ConfigHash: "old", State: instance.StateRunning, Health: flavor.HealthHealthy},
				{ID: "b", ConfigHash: "new", State: instance.StateRunning, Health: flavor.HealthHealthy},
				{ID: "c", State: instance.StateRunning, Health: flavor.HealthHealthy},
			},
		},
		want: `{"group":"web","size":5,"freed":false,"instances":[` +
			`{"id":"a","logical_id":null,"tags":{},"state":"running","health":"healthy","address":""},` +
			`{"id":"b","logical_id":null,"tags":{},"state":"running","health":"healthy","address":""},` +
			`{"id":"c","logical_id":null,"tags":{},"state":"running","health":"healthy","address":""}],` +
			`"rolling":{"outdated":2,"stopped":true}}`,
	}, {
		name: "pets sorted by logical id, no size",
		view: operation.GroupView{
			Name:  "db",
			Freed: true,
			Instances: []group.Member{
				{ID: "x", LogicalID: "10.0.0.2", State: instance.StateRunning, Health: flavor.HealthHealthy},
				{ID: "y", LogicalID: "10.0.0.1", State: instance.StateTerminating, Health: flavor.HealthUnhealthy},
			},
		},
		want: `{"group":"db","freed":true,"instances":[` +
			`{"id":"y","logical_id":"10.0.0.1","tags":{},"state":"terminating","health":"unhealthy","address":""},` +
			`{"id":"x","logical_id":"10.0.0.2","tags":{},"state":"running","health":"healthy","address":""}],` +
			`"rolling":{"outdated":0,"stopped":false}}`,
	}, {
		name: "empty group has an empty array",
		view: operation.GroupView{Name: "none", Size: new(int)},
		want: `{"group":"none","size":0,"freed":false,"instances":[],"rolling":{"outdated":0,"stopped":false}}`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(newGroupJSON(tt.view))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("newGroupJSON =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestGroupTables(t *testing.T) {
	three := 3
	views := []operation.GroupView{{
		Name: "web", Size: &three,
		Instances: []group.Member{
			{ID: "i-2", State: instance.StateRunning, Health: flavor.HealthHealthy},
			{ID: "i-1", State: instance.StatePending, Health: flavor.HealthUnknown},
		},
		Tags: map[instance.ID]map[string]string{"i-1": {"infrakit.stack": "s", "tier": "web", "env": "dev"}},
	}, {
		Name: "db", Freed: true,
		Instances: []group.Member{{ID: "p-1", LogicalID: "10.0.0.1", State: instance.StateRunning, Health: flavor.HealthHealthy}},
	}}

	var ls bytes.Buffer
	if err := writeGroupTable(&ls, views); err != nil {
		t.Fatal(err)
	}
	wantLs := "" +
		"GROUP  SIZE  INSTANCES  HEALTHY  STATUS\n" +
		"web    3     2          1        managed\n" +
		"db     pets  1          1        freed\n"
	if ls.String() != wantLs {
		t.Errorf("group ls table =\n%s\nwant\n%s", ls.String(), wantLs)
	}

	var desc bytes.Buffer
	if err := writeGroupDescription(&desc, views[0]); err != nil {
		t.Fatal(err)
	}
	wantDesc := "" +
		"Group \"web\": size 3, 2 instances (1 healthy), managed\n\n" +
		"ID   LOGICAL ID  STATE    HEALTH   TAGS\n" +
		"i-1  -           pending  unknown  env=dev,tier=web\n" +
		"i-2  -           running  healthy  -\n"
	if desc.String() != wantDesc {
		t.Errorf("group describe =\n%s\nwant\n%s", desc.String(), wantDesc)
	}
}

// TestGroupBadArguments: argument errors are caught before anything is
// loaded or launched, and answered with the usage.
func TestGroupBadArguments(t *testing.T) {
	tests := []struct {
		name    string
		cmd     func(Meta) cli.Command
		args    []string
		wantErr string
	}{
		{"describe without name", groupDescribeCmd, nil, "needs the name of a group"},
		{"describe two names", groupDescribeCmd, []string{"a", "b"}, `unexpected arguments ["b"]`},
		{"scale without name", groupScaleCmd, []string{"-json"}, "flag provided but not defined: -json"},
		{"scale not a number", groupScaleCmd, []string{"web", "ten"}, `got "ten"`},
		{"scale negative", groupScaleCmd, []string{"web", "--", "-1"}, `got "-1"`},
		{"scale too many", groupScaleCmd, []string{"web", "1", "2"}, `unexpected arguments ["2"]`},
		{"scale parallelism 0", groupScaleCmd, []string{"web", "3", "-parallelism=0"}, "-parallelism must be at least 1"},
		{"destroy-instances without ids", groupDestroyInstancesCmd, []string{"web"}, "needs more arguments"},
		{"free two names", groupFreeCmd, []string{"web", "db"}, `unexpected arguments ["db"]`},
		{"destroy without name", groupDestroyCmd, []string{"-auto-approve"}, "needs the name of a group"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCommand(t, tt.cmd, t.TempDir(), tt.args...)
			if code != cli.RunResultHelp {
				t.Errorf("exit %d, want cli.RunResultHelp", code)
			}
			if !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr, tt.wantErr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q", stdout)
			}
		})
	}
}

func groupListCmd(m Meta) cli.Command             { return &GroupListCommand{Meta: m} }
func groupDescribeCmd(m Meta) cli.Command         { return &GroupDescribeCommand{Meta: m} }
func groupScaleCmd(m Meta) cli.Command            { return &GroupScaleCommand{Meta: m} }
func groupDestroyInstancesCmd(m Meta) cli.Command { return &GroupDestroyInstancesCommand{Meta: m} }
func groupFreeCmd(m Meta) cli.Command             { return &GroupFreeCommand{Meta: m} }
func groupDestroyCmd(m Meta) cli.Command          { return &GroupDestroyCommand{Meta: m} }

// groupStack is a stack of one cattle group and one pet group over the
// shipped providers.
const groupStack = `
stack "grouptest" {}

provider "simulator" {}
provider "vanilla" {}

group "web" {
  size = 3
  tags = { tier = "web" }
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor {
    provider   = vanilla
    properties = { init = ["echo hello"] }
  }
}

group "db" {
  logical_ids = ["10.0.0.1", "10.0.0.2"]
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor { provider = vanilla }
}
`

// applyStack applies the stack of wd through an operation.Runner, as
// `infrakit apply -auto-approve` does, so these tests depend only on the
// group verbs under test.
func applyStack(t *testing.T, wd string) {
	t.Helper()
	ctx := context.Background()
	r, err := operation.New(ctx, operation.Options{WorkDir: wd, Operation: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st, _, diags := r.LoadStack(ctx)
	if diags.HasErrors() {
		t.Fatalf("load stack: %s", diags.Error())
	}
	p, err := r.Plan(ctx, st, operation.PlanMode{})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	res, err := r.Apply(ctx, p)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if len(res.Failed) > 0 {
		t.Fatalf("apply failures: %v", res.Failed)
	}
}

// runWithInput runs a command in wd with stdin, returning exit code and output.
func runWithInput(t *testing.T, newCmd func(Meta) cli.Command, wd, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	m := NewMeta(wd, strings.NewReader(stdin), &stdout, &stderr)
	code := newCmd(m).Run(args)
	return code, stdout.String(), stderr.String()
}

// groupsByName runs `group ls -json` and indexes its output.
func groupsByName(t *testing.T, wd string, args ...string) map[string]groupJSON {
	t.Helper()
	code, stdout, stderr := runCommand(t, groupListCmd, wd, append([]string{"-json"}, args...)...)
	if code != 0 {
		t.Fatalf("group ls -json: exit %d: %s", code, stderr)
	}
	var list []groupJSON
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("group ls -json output: %v\n%s", err, stdout)
	}
	out := map[string]groupJSON{}
	for _, g := range list {
		out[g.Group] = g
	}
	return out
}

// simulatorFiles counts the simulator's compute instance files in wd.
func simulatorFiles(t *testing.T, wd string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(wd, ".infrakit", "simulator", "instances", "compute", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// TestGroupVerbs drives every group verb in-process against real provider
// subprocesses and a real state file.
func TestGroupVerbs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and launches providers")
	}
	bin := buildProviders(t)
	wd := t.TempDir()
	writeStack(t, wd, groupStack)
	if code, _, stderr := runCommand(t, initCmd, wd, "-plugin-dir", bin); code != 0 {
		t.Fatalf("init: exit %d: %s", code, stderr)
	}
	applyStack(t, wd)

	groups := groupsByName(t, wd)
	if len(groups) != 2 || len(groups["web"].Instances) != 3 || len(groups["db"].Instances) != 2 {
		t.Fatalf("after apply: groups = %+v, want web 3 and db 2", groups)
	}
	if s := groups["web"].Size; s == nil || *s != 3 || groups["db"].Size != nil {
		t.Errorf("sizes web=%v db=%v, want 3 and absent", groups["web"].Size, groups["db"].Size)
	}
	for _, inst := range groups["web"].Instances {
		if inst.Tags["tier"] != "web" || inst.Tags["infrakit.group"] != "web" || inst.LogicalID != nil {
			t.Errorf("web instance %+v: want tier=web, infrakit.group=web, no logical id", inst)
		}
	}
	var pets []string
	for _, inst := range groups["db"].Instances {
		if inst.LogicalID == nil {
			t.Fatalf("db instance %s has no logical id", inst.ID)
		}
		pets = append(pets, *inst.LogicalID)
	}
	if !slices.Equal(pets, []string{"10.0.0.1", "10.0.0.2"}) {
		t.Errorf("db logical ids %q", pets)
	}
	if n := len(simulatorFiles(t, wd)); n != 5 {
		t.Errorf("simulator holds %d instances, want 5", n)
	}

	t.Run("ls filters by name, flags after", func(t *testing.T) {
		// One name: that group's object, the DESIGN.md shape.
		code, stdout, stderr := runCommand(t, groupListCmd, wd, "web", "-json")
		var one groupJSON
		if code != 0 || json.Unmarshal([]byte(stdout), &one) != nil || one.Group != "web" || len(one.Instances) != 3 {
			t.Errorf("group ls web -json: exit %d, want one object\n%s%s", code, stdout, stderr)
		}
		// Several names, or none: an array, in the order named.
		code, stdout, stderr = runCommand(t, groupListCmd, wd, "-json", "db", "web")
		var several []groupJSON
		if code != 0 || json.Unmarshal([]byte(stdout), &several) != nil || len(several) != 2 ||
			several[0].Group != "db" || several[1].Group != "web" {
			t.Errorf("group ls -json db web: exit %d, want an array of db and web\n%s%s", code, stdout, stderr)
		}
		if groups := groupsByName(t, wd); len(groups) != 2 {
			t.Errorf("group ls -json: %d groups, want an array of 2", len(groups))
		}
		code, stdout, stderr = runCommand(t, groupListCmd, wd)
		if code != 0 || !strings.Contains(stdout, "GROUP") || !strings.Contains(stdout, "db     pets") {
			t.Errorf("group ls: exit %d\n%s%s", code, stdout, stderr)
		}
	})

	t.Run("describe", func(t *testing.T) {
		code, stdout, stderr := runCommand(t, groupDescribeCmd, wd, "-json", "db")
		var g groupJSON
		if code != 0 || json.Unmarshal([]byte(stdout), &g) != nil || g.Group != "db" || len(g.Instances) != 2 {
			t.Errorf("group describe -json db: exit %d\n%s%s", code, stdout, stderr)
		}
		code, stdout, stderr = runCommand(t, groupDescribeCmd, wd, "web")
		if code != 0 || !strings.Contains(stdout, `Group "web": size 3, 3 instances`) || !strings.Contains(stdout, "tier=web") {
			t.Errorf("group describe web: exit %d\n%s%s", code, stdout, stderr)
		}
		code, _, stderr = runCommand(t, groupDescribeCmd, wd, "nope")
		if code != 1 || !strings.Contains(stderr, "nope") {
			t.Errorf("group describe nope: exit %d, stderr %q; want 1 naming the group", code, stderr)
		}
	})

	t.Run("scale", func(t *testing.T) {
		code, stdout, stderr := runCommand(t, groupScaleCmd, wd, "web")
		if code != 0 || stdout != "3\n" {
			t.Errorf("group scale web: exit %d, stdout %q, stderr %q; want 3", code, stdout, stderr)
		}
		code, stdout, _ = runCommand(t, groupScaleCmd, wd, "db")
		if code != 0 || stdout != "2\n" {
			t.Errorf("group scale db: exit %d, stdout %q; want 2 (its logical IDs)", code, stdout)
		}
		code, stdout, stderr = runCommand(t, groupScaleCmd, wd, "web", "5")
		if code != 0 || !strings.Contains(stdout, `Group "web" scaled to 5: 2 created, 0 destroyed.`) {
			t.Fatalf("group scale web 5: exit %d\n%s%s", code, stdout, stderr)
		}
		if n := len(groupsByName(t, wd)["web"].Instances); n != 5 {
			t.Errorf("after scale 5: web has %d instances", n)
		}
		if code, stdout, _ := runCommand(t, groupScaleCmd, wd, "web"); code != 0 || stdout != "5\n" {
			t.Errorf("group scale web after scaling: %q, want 5", stdout)
		}
		code, stdout, stderr = runCommand(t, groupScaleCmd, wd, "db", "4")
		if code != 1 {
			t.Errorf("group scale db 4 (pets): exit %d, want 1\n%s%s", code, stdout, stderr)
		}
	})

	t.Run("destroy-instances", func(t *testing.T) {
		web := groupsByName(t, wd)["web"].Instances
		victims := []string{string(web[0].ID), string(web[1].ID)}
		code, stdout, stderr := runCommand(t, groupDestroyInstancesCmd, wd, append([]string{"web"}, victims...)...)
		if code != 0 || !strings.Contains(stdout, `Destroyed 2 of the 2 instances named in group "web".`) {
			t.Fatalf("destroy-instances: exit %d\n%s%s", code, stdout, stderr)
		}
		after := groupsByName(t, wd)["web"]
		if len(after.Instances) != 3 || after.Size == nil || *after.Size != 3 {
			t.Errorf("after destroying 2 of 5: %d instances, size %v; want 3 and 3", len(after.Instances), after.Size)
		}
		for _, inst := range after.Instances {
			if slices.Contains(victims, string(inst.ID)) {
				t.Errorf("destroyed instance %s still listed", inst.ID)
			}
		}
		for _, v := range victims {
			if _, err := os.Stat(filepath.Join(wd, ".infrakit", "simulator", "instances", "compute", v+".json")); !os.IsNotExist(err) {
				t.Errorf("simulator still holds %s (stat: %v)", v, err)
			}
		}
	})

	t.Run("free", func(t *testing.T) {
		before := simulatorFiles(t, wd)
		code, stdout, stderr := runCommand(t, groupFreeCmd, wd, "web")
		if code != 0 || !strings.Contains(stdout, `Group "web" is freed`) {
			t.Fatalf("group free: exit %d\n%s%s", code, stdout, stderr)
		}
		if g := groupsByName(t, wd)["web"]; !g.Freed || len(g.Instances) != 3 {
			t.Errorf("after free: freed=%v with %d instances; want freed, 3 left alone", g.Freed, len(g.Instances))
		}
		if after := simulatorFiles(t, wd); !slices.Equal(before, after) {
			t.Errorf("free touched the provider: %q -> %q", before, after)
		}
	})

	t.Run("destroy asks", func(t *testing.T) {
		code, stdout, stderr := runWithInput(t, groupDestroyCmd, wd, "no\n", "db")
		if code != 1 || !strings.Contains(stderr, "Destroy cancelled") || !strings.Contains(stdout, `Do you really want to destroy group "db"?`) ||
			!strings.Contains(stdout, "all 2 of its instances") {
			t.Errorf("group destroy db answered no: exit %d\n%s%s", code, stdout, stderr)
		}
		if n := len(groupsByName(t, wd)["db"].Instances); n != 2 {
			t.Errorf("after a cancelled destroy db has %d instances, want 2", n)
		}
		code, stdout, stderr = runWithInput(t, groupDestroyCmd, wd, "yes\n", "db")
		if code != 0 || !strings.Contains(stdout, `Group "db" destroyed: 2 instances destroyed.`) {
			t.Errorf("group destroy db answered yes: exit %d\n%s%s", code, stdout, stderr)
		}
		if _, ok := groupsByName(t, wd)["db"]; ok {
			t.Errorf("db still listed after destroy")
		}
		if n := len(simulatorFiles(t, wd)); n != 3 {
			t.Errorf("simulator holds %d instances after destroying db, want web's 3", n)
		}
	})
}
