package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/provider"
)

// fakeProviders is a Validator answering from tables. The real path (plugin
// processes) is tested where the plugin host lives; here only the mapping
// from answers to diagnostics is under test.
type fakeProviders struct {
	meta      map[string]provider.Metadata
	metaErr   map[string]error
	instance  func(key, typ string, props json.RawMessage) error
	flavor    func(key, typ string, props json.RawMessage, alloc flavor.Allocation) error
	calls     []string
	metaCalls map[string]int
}

type ctxKey struct{}

func (f *fakeProviders) Metadata(ctx context.Context, key string) (provider.Metadata, error) {
	if ctx.Value(ctxKey{}) == nil {
		return provider.Metadata{}, errors.New("context not passed")
	}
	if f.metaCalls == nil {
		f.metaCalls = map[string]int{}
	}
	f.metaCalls[key]++
	if err := f.metaErr[key]; err != nil {
		return provider.Metadata{}, err
	}
	md, ok := f.meta[key]
	if !ok {
		return provider.Metadata{}, fmt.Errorf("no provider %q", key)
	}
	return md, nil
}

func (f *fakeProviders) ValidateInstance(ctx context.Context, key, typ string, props json.RawMessage) error {
	f.calls = append(f.calls, fmt.Sprintf("instance %s %s %s", key, typ, props))
	if f.instance != nil {
		return f.instance(key, typ, props)
	}
	return nil
}

func (f *fakeProviders) ValidateFlavor(ctx context.Context, key, typ string, props json.RawMessage, alloc flavor.Allocation) error {
	f.calls = append(f.calls, fmt.Sprintf("flavor %s %s %s size=%d ids=%v", key, typ, props, alloc.Size, alloc.LogicalIDs))
	if f.flavor != nil {
		return f.flavor(key, typ, props, alloc)
	}
	return nil
}

func testMetadata() map[string]provider.Metadata {
	return map[string]provider.Metadata{
		"sim": {Name: "sim", Objects: []provider.Object{
			{Kind: provider.KindInstance, Type: "compute", Schema: provider.Schema{Attributes: map[string]provider.Attribute{
				"cpu":  {Type: "number", Required: true, Description: "how many CPUs"},
				"disk": {Type: "map(string)"},
				"init": {Type: "list(string)"},
			}}},
			{Kind: provider.KindInstance, Type: "container", Schema: provider.Schema{Open: true}},
			{Kind: provider.KindLoadBalancer, Type: provider.AnyName},
			{Kind: provider.KindAuthorizer, Type: "disk", Schema: provider.Schema{Attributes: map[string]provider.Attribute{
				"host": {Type: "string", Required: true},
				"iops": {Type: "number"},
			}}},
		}},
		"van": {Name: "van", Objects: []provider.Object{
			{Kind: provider.KindFlavor, Type: "vanilla", Schema: provider.Schema{Open: true}},
		}},
		"multi": {Name: "multi", Objects: []provider.Object{
			{Kind: provider.KindFlavor, Type: "a"},
			{Kind: provider.KindFlavor, Type: "b"},
		}},
		"lbonly": {Name: "lbonly", Objects: []provider.Object{
			{Kind: provider.KindLoadBalancer, Type: "front"},
		}},
	}
}

// validationHeader declares the providers; line 7 is the first line of a case.
const validationHeader = `stack "s" {}
provider "sim" {}
provider "van" {}
provider "multi" {}
provider "lbonly" {}
provider "broken" {}
`

// validGroup is a group that passes; cases append to it or replace it.
const validGroup = `group "g" {
  size = 2
  instance {
    provider   = sim
    type       = "compute"
    properties = { cpu = 2, init = ["a", "b"] }
  }
  flavor { provider = van }
}
`

type wantDiag struct {
	pos, summary, detail string
	warning              bool
}

func TestValidateWithProviders(t *testing.T) {
	instanceGroup := func(typ, props string) string {
		return `group "g" {
  size = 2
  instance {
    provider   = sim
    type       = "` + typ + `"
    properties = ` + props + `
  }
  flavor { provider = van }
}
`
	}
	tests := []struct {
		name  string
		src   string
		setup func(f *fakeProviders)
		want  []wantDiag
		calls []string // nil: not checked
	}{
		{
			name: "valid stack fills in the flavor type",
			src:  validGroup,
			calls: []string{
				`instance sim compute {"cpu":2,"init":["a","b"]}`,
				`flavor van vanilla {} size=2 ids=[]`,
			},
		},
		{
			name: "pets pass their logical IDs to the flavor",
			src: `group "g" {
  logical_ids = ["x", "y"]
  instance {
    provider = sim
    type     = "container"
  }
  flavor {
    provider   = van
    type       = "vanilla"
    properties = { anything = [1, 2] }
  }
}
`,
			calls: []string{`instance sim container {}`, `flavor van vanilla {"anything":[1,2]} size=0 ids=[x y]`},
		},
		{
			name: "a flavor's diagnostic about a logical ID points at it in logical_ids",
			src: `group "g" {
  logical_ids = ["x", "y"]
  instance {
    provider = sim
    type     = "container"
  }
  flavor { provider = van }
}
`,
			setup: func(f *fakeProviders) {
				f.flavor = func(_, _ string, _ json.RawMessage, _ flavor.Allocation) error {
					return provider.Diagnostics{
						{Severity: provider.Error, Summary: "Invalid member address", Detail: "y is not one", Path: flavor.LogicalIDPath(1)},
						{Severity: provider.Warning, Summary: "Even number of members", Path: []string{flavor.AllocationPath, "logical_ids"}},
					}
				}
			},
			want: []wantDiag{
				{"stack.hcl:8:23", "Invalid member address", "y is not one", false},
				{"stack.hcl:8:17", "Even number of members", `Reported by provider "van" (flavor type "vanilla").`, true},
			},
		},
		{
			name: "unknown instance type",
			src:  instanceGroup("computer", "{ cpu = 1 }"),
			want: []wantDiag{{"stack.hcl:11:18", "Unknown instance type", `Provider "sim" has no instance type "computer"; it serves "compute", "container". Did you mean "compute"?`, false}},
		},
		{
			name: "a provider serving no instances",
			src: `group "g" {
  size = 1
  instance {
    provider = van
    type     = "vm"
  }
  flavor { provider = van }
}
`,
			want: []wantDiag{{"stack.hcl:11:16", "Unknown instance type", `Provider "van" serves no instance types.`, false}},
		},
		{
			name: "several flavor types and none named",
			src:  strings.Replace(validGroup, "flavor { provider = van }", "flavor { provider = multi }", 1),
			want: []wantDiag{{"stack.hcl:14:3", "Missing flavor type", `serves several flavor types ("a", "b")`, false}},
		},
		{
			name: "a flavor provider serving no flavors",
			src:  strings.Replace(validGroup, "flavor { provider = van }", "flavor { provider = lbonly }", 1),
			want: []wantDiag{{"stack.hcl:14:23", "Not a flavor provider", `Provider "lbonly" serves no flavors.`, false}},
		},
		{
			name: "unsupported property points at its key",
			src:  instanceGroup("compute", `{ cpu = 2, colour = "red" }`),
			want: []wantDiag{{"stack.hcl:12:29", "Unsupported property", `Provider "sim" (instance type "compute") has no property "colour"; it takes "cpu", "disk", "init".`, false}},
		},
		{
			name: "a misspelled property is unsupported and the right one missing",
			src:  instanceGroup("compute", `{ cpus = 2 }`),
			want: []wantDiag{
				{"stack.hcl:12:20", "Unsupported property", `no property "cpus"; did you mean "cpu"?`, false},
				{"stack.hcl:12:18", "Missing required property", `requires the property "cpu": how many CPUs.`, false},
			},
			// The instance is not sent to the provider; the flavor still is.
			calls: []string{`flavor van vanilla {} size=2 ids=[]`},
		},
		{
			name: "missing properties entirely",
			src: `group "g" {
  size = 1
  instance {
    provider = sim
    type     = "compute"
  }
  flavor { provider = van }
}
`,
			want: []wantDiag{{"stack.hcl:9:3", "Missing required property", `"cpu"`, false}},
		},
		{
			name: "wrong property type points at the value",
			src:  instanceGroup("compute", `{ cpu = 2, disk = { size = [1] } }`),
			want: []wantDiag{{"stack.hcl:12:36", "Incorrect property type", `Property "disk" of provider "sim" (instance type "compute") must be map(string)`, false}},
		},
		{
			name: "provider diagnostics with a path point inside the object",
			src:  validGroup,
			setup: func(f *fakeProviders) {
				f.instance = func(key, typ string, props json.RawMessage) error {
					return fmt.Errorf("provider %q: Validate: %w", key, provider.Diagnostics{
						{Severity: provider.Error, Summary: "Bad init line", Detail: "b is not a command.", Path: []string{"init", "1"}},
						{Severity: provider.Warning, Summary: "Few CPUs", Path: []string{"cpu"}},
						{Severity: provider.Error, Summary: "No such thing", Path: []string{"init", "7"}},
						{Severity: provider.Error, Summary: "Whole object"},
					})
				}
			},
			want: []wantDiag{
				{"stack.hcl:12:42", "Bad init line", "b is not a command.\n\nReported by provider \"sim\" (instance type \"compute\").", false},
				{"stack.hcl:12:26", "Few CPUs", `Reported by provider "sim"`, true},
				{"stack.hcl:12:36", "No such thing", "", false}, // index out of range: the list
				{"stack.hcl:12:18", "Whole object", "", false},
			},
		},
		{
			name: "any other error is reported at the properties",
			src:  validGroup,
			setup: func(f *fakeProviders) {
				f.flavor = func(key, typ string, props json.RawMessage, alloc flavor.Allocation) error {
					return errors.New("vanilla is unhappy")
				}
			},
			want: []wantDiag{{"stack.hcl:14:3", "Invalid properties", `Rejected by provider "van" (flavor type "vanilla"): vanilla is unhappy`, false}},
		},
		{
			name: "an unavailable provider is reported once, at its block",
			src: validGroup + `loadbalancer "a" { provider = broken }
loadbalancer "b" { provider = broken }
`,
			setup: func(f *fakeProviders) { f.metaErr = map[string]error{"broken": errors.New("exec: not found")} },
			want:  []wantDiag{{"stack.hcl:6:1", "Provider unavailable", `Provider "broken" could not describe itself: exec: not found`, false}},
		},
		{
			name: "load balancer names",
			src: validGroup + `loadbalancer "any" { provider = sim }
loadbalancer "front" { provider = lbonly }
loadbalancer "back" { provider = lbonly }
loadbalancer "vlb" { provider = van }
`,
			want: []wantDiag{
				{"stack.hcl:18:1", "Unknown load balancer", `Provider "lbonly" has no load balancer "back"; it serves "front".`, false},
				{"stack.hcl:19:1", "Unknown load balancer", `Provider "van" serves no load balancers.`, false},
			},
		},
		{
			name: "enrollment target properties are checked against the schema",
			src: validGroup + `enrollment "e" {
  source = group.g
  target {
    provider   = sim
    type       = "disk"
    properties = { host = member.address, iops = "fast", extra = member.id }
  }
}
enrollment "f" {
  source = group.g
  target {
    provider   = sim
    type       = "disk"
    properties = member.properties
  }
}
enrollment "h" {
  source = group.g
  target {
    provider = sim
    type     = "tape"
  }
}
`,
			want: []wantDiag{
				{"stack.hcl:21:58", "Unsupported property", `Provider "sim" (authorizer type "disk") has no property "extra"`, false},
				{"stack.hcl:21:50", "Incorrect property type", `Property "iops" of provider "sim" (authorizer type "disk") must be number`, false},
				{"stack.hcl:36:16", "Unknown authorizer type", `Provider "sim" has no authorizer type "tape"; it serves "disk".`, false},
			},
		},
		{
			name: "enrollment target missing a required property",
			src: validGroup + `enrollment "e" {
  source = group.g
  target {
    provider   = sim
    type       = "disk"
    properties = { iops = 10 }
  }
}
`,
			want: []wantDiag{{"stack.hcl:21:18", "Missing required property", `requires the property "host"`, false}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, diags, dir := loadSource(t, map[string]string{"stack.hcl": validationHeader + tt.src})
			if len(diags) > 0 {
				t.Fatalf("load:\n%s", render(st, diags))
			}
			f := &fakeProviders{meta: testMetadata()}
			if tt.setup != nil {
				tt.setup(f)
			}
			ctx := context.WithValue(context.Background(), ctxKey{}, true)
			diags = config.ValidateWithProviders(ctx, st, f)

			var got []wantDiag
			for _, d := range diags {
				got = append(got, wantDiag{pos(dir, d.Subject), d.Summary, d.Detail, d.Severity == hcl.DiagWarning})
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d diagnostics, want %d:\n%s", len(got), len(tt.want), render(st, diags))
			}
			for i, w := range tt.want {
				g := got[i]
				if g.pos != w.pos || g.summary != w.summary || !strings.Contains(g.detail, w.detail) || g.warning != w.warning {
					t.Errorf("diagnostic %d = %+v\nwant %+v\n%s", i, g, w, render(st, diags))
				}
			}
			if tt.calls != nil && !slices.Equal(f.calls, tt.calls) {
				t.Errorf("calls = %q\nwant %q", f.calls, tt.calls)
			}
			for key, n := range f.metaCalls {
				if n != 1 {
					t.Errorf("Metadata(%s) called %d times", key, n)
				}
			}
		})
	}
}

func TestValidateFillsFlavorTypeWithoutChangingHash(t *testing.T) {
	st := mustLoad(t, validationHeader+validGroup)
	g := st.Group("g")
	before := g.ConfigHash()
	ctx := context.WithValue(context.Background(), ctxKey{}, true)
	if diags := config.ValidateWithProviders(ctx, st, &fakeProviders{meta: testMetadata()}); len(diags) > 0 {
		t.Fatal(render(st, diags))
	}
	if f := g.Flavors[0]; f.Type != "vanilla" || !f.TypeImplied {
		t.Errorf("flavor = %+v", f)
	}
	if g.ConfigHash() != before {
		t.Error("filling in the flavor type changed the config hash")
	}
	// Written back out, the type stays implicit as the user wrote it.
	src, err := st.MarshalHCL()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(src), `"vanilla"`) {
		t.Errorf("implied type written out:\n%s", src)
	}
}

// A stack read back from state has no source ranges: diagnostics come
// without a subject instead of pointing nowhere.
func TestValidateStackFromState(t *testing.T) {
	st := jsonRoundTrip(t, mustLoad(t, validationHeader+strings.Replace(validGroup, `"compute"`, `"computer"`, 1)))
	ctx := context.WithValue(context.Background(), ctxKey{}, true)
	f := &fakeProviders{meta: testMetadata(), instance: func(string, string, json.RawMessage) error {
		return provider.AttributeError("bad", "", "cpu")
	}}
	diags := config.ValidateWithProviders(ctx, st, f)
	if len(diags) != 1 || diags[0].Summary != "Unknown instance type" || diags[0].Subject != nil {
		t.Fatalf("diags = %v", diags)
	}
	st.Groups[0].Instance.Type = "compute"
	diags = config.ValidateWithProviders(ctx, st, f)
	if len(diags) != 1 || diags[0].Summary != "bad" || diags[0].Subject != nil {
		t.Fatalf("diags = %v", diags)
	}
}
