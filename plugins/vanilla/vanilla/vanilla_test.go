package vanilla

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/provider"
)

func TestValidate(t *testing.T) {
	type want struct {
		path    string // strings.Join(Path, ".")
		summary string
		detail  string // substring
	}
	for _, tc := range []struct {
		name  string
		props string
		want  []want
	}{
		{name: "absent", props: ``},
		{name: "null", props: `null`},
		{name: "empty", props: `{}`},
		{name: "e2e miners", props: `{"init": ["curl -sSL https://get.docker.com | sh", "docker run -d -p 80:80 stuff/miner"], "tags": {"project": "infrakit", "tier": "miners"}}`},
		{name: "null attributes", props: `{"init": null, "tags": null, "attachments": null}`},
		{name: "attachments", props: `{"attachments": [{"id": "vol-1", "type": "ebs"}]}`},
		{name: "not an object", props: `["init"]`, want: []want{{"", "Invalid properties", "got list"}}},
		{name: "invalid JSON", props: `{"init": [`, want: []want{{"", "Invalid properties", "invalid JSON"}}},
		{name: "init not a list", props: `{"init": "echo hi"}`, want: []want{{"init", "Incorrect attribute value type", "got string"}}},
		{name: "init element", props: `{"init": ["ok", 1, "ok", true]}`, want: []want{
			{"init.1", "Incorrect attribute value type", "init.1 must be a string, got number"},
			{"init.3", "Incorrect attribute value type", "got bool"},
		}},
		{name: "tags not a map", props: `{"tags": ["a"]}`, want: []want{{"tags", "Incorrect attribute value type", "map of strings"}}},
		{name: "tag value", props: `{"tags": {"x": 1, "y": "ok", "z": {"a": "b"}}}`, want: []want{
			{"tags.x", "Incorrect attribute value type", "got number"},
			{"tags.z", "Incorrect attribute value type", "got object"},
		}},
		{name: "unknown key", props: `{"init": [], "size": 3}`, want: []want{
			{"size", "Unsupported argument", `"size" is not expected in the vanilla flavor's properties. The arguments expected there are "init", "tags", "attachments"`},
		}},
		{name: "attachment shape", props: `{"attachments": [{"id": "a"}, "b", {"id": 1, "type": "t", "size": 2}]}`, want: []want{
			{"attachments.0.type", "Missing required argument", `needs "type"`},
			{"attachments.1", "Incorrect attribute value type", "got string"},
			{"attachments.2.size", "Unsupported argument", `"id", "type"`},
			{"attachments.2.id", "Incorrect attribute value type", "got number"},
		}},
		{name: "several at once", props: `{"init": [1], "tags": {"t": false}, "color": "red"}`, want: []want{
			{"color", "Unsupported argument", ""},
			{"init.0", "Incorrect attribute value type", ""},
			{"tags.t", "Incorrect attribute value type", ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Flavor{}.Validate(context.Background(), json.RawMessage(tc.props), flavor.Allocation{Size: 1})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			var diags provider.Diagnostics
			if !errors.As(err, &diags) {
				t.Fatalf("Validate = %#v, want provider.Diagnostics", err)
			}
			if len(diags) != len(tc.want) {
				t.Fatalf("got %d diagnostics, want %d: %v", len(diags), len(tc.want), diags)
			}
			for i, w := range tc.want {
				d := diags[i]
				if d.Severity != provider.Error || strings.Join(d.Path, ".") != w.path || d.Summary != w.summary || !strings.Contains(d.Detail, w.detail) {
					t.Errorf("diagnostic %d = %+v, want path %q summary %q detail containing %q", i, d, w.path, w.summary, w.detail)
				}
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	base := instance.Spec{
		Properties:  json.RawMessage(`{"note":"x"}`),
		Tags:        map[string]string{"infrakit.group": "miners", "tier": "group"},
		Init:        "#!/bin/sh",
		Attachments: []instance.Attachment{{ID: "vol-0", Type: "ebs"}},
	}
	for _, tc := range []struct {
		name  string
		spec  instance.Spec
		props string
		want  instance.Spec
	}{
		{name: "no properties", spec: base, props: ``, want: base},
		{
			name: "e2e miners", spec: base,
			props: `{"init": ["curl -sSL https://get.docker.com | sh", "docker run -d -p 80:80 stuff/miner"], "tags": {"project": "infrakit", "tier": "miners"}}`,
			want: instance.Spec{
				Properties:  base.Properties,
				Tags:        map[string]string{"infrakit.group": "miners", "project": "infrakit", "tier": "miners"},
				Init:        "#!/bin/sh\ncurl -sSL https://get.docker.com | sh\ndocker run -d -p 80:80 stuff/miner",
				Attachments: base.Attachments,
			},
		},
		{
			name: "empty spec", spec: instance.Spec{},
			props: `{"init": ["a"], "tags": {"k": "v"}, "attachments": [{"id": "ip-1", "type": "eip"}]}`,
			want:  instance.Spec{Init: "a", Tags: map[string]string{"k": "v"}, Attachments: []instance.Attachment{{ID: "ip-1", Type: "eip"}}},
		},
		{
			name: "init ending in newline", spec: instance.Spec{Init: "first\n"},
			props: `{"init": ["second"]}`,
			want:  instance.Spec{Init: "first\nsecond"},
		},
		{
			name: "attachments appended", spec: base,
			props: `{"attachments": [{"id": "vol-1", "type": "ebs"}]}`,
			want: instance.Spec{
				Properties: base.Properties, Tags: base.Tags, Init: base.Init,
				Attachments: []instance.Attachment{{ID: "vol-0", Type: "ebs"}, {ID: "vol-1", Type: "ebs"}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Flavor{}.Prepare(context.Background(), json.RawMessage(tc.props), tc.spec, flavor.Allocation{Size: 5}, flavor.Index{Group: "miners", Sequence: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Prepare =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
	if _, err := (Flavor{}).Prepare(context.Background(), json.RawMessage(`{"init": 1}`), base, flavor.Allocation{}, flavor.Index{}); err == nil {
		t.Fatal("Prepare accepted invalid properties")
	}
}

func TestHealthyAndDrain(t *testing.T) {
	h, err := Flavor{}.Healthy(context.Background(), nil, instance.Description{ID: "any"})
	if err != nil || h != flavor.HealthHealthy {
		t.Fatalf("Healthy = %s, %v", h, err)
	}
	if err := (Flavor{}).Drain(context.Background(), nil, instance.Description{ID: "any"}); err != nil {
		t.Fatal(err)
	}
}

func TestMetadata(t *testing.T) {
	md := Metadata("0.1.0")
	o, ok := md.Find(provider.KindFlavor, "vanilla")
	if md.Name != "vanilla" || md.Version != "0.1.0" || !ok || o.Schema.Open || !o.HealthFromState {
		t.Fatalf("metadata = %+v", md)
	}
	for _, k := range topKeys {
		if o.Schema.Attributes[k].Type == "" {
			t.Errorf("schema lacks a type for %q", k)
		}
	}
	if len(o.Schema.Attributes) != len(topKeys) {
		t.Errorf("schema attributes %v != accepted keys %v", slices.Sorted(maps.Keys(o.Schema.Attributes)), topKeys)
	}
}

// The schema's types are HCL type constraints, as provider.Schema requires,
// so the core can check properties against them.
func TestSchemaTypesAreHCLTypeConstraints(t *testing.T) {
	for name, a := range Schema().Attributes {
		expr, diags := hclsyntax.ParseExpression([]byte(a.Type), name, hcl.InitialPos)
		if !diags.HasErrors() {
			_, diags = typeexpr.TypeConstraint(expr)
		}
		if diags.HasErrors() {
			t.Errorf("%s: type %q: %v", name, a.Type, diags)
		}
	}
}

// Apply never touches its input, keeps everything the spec had, and lets the
// flavor's tags win.
func TestApplyProperties(t *testing.T) {
	str := rapid.StringMatching(`[a-z]{0,4}`)
	tags := rapid.MapOf(rapid.SampledFrom([]string{"a", "b", "c", "d"}), str)
	atts := rapid.SliceOf(rapid.Custom(func(t *rapid.T) instance.Attachment {
		return instance.Attachment{ID: str.Draw(t, "id"), Type: str.Draw(t, "type")}
	}))
	rapid.Check(t, func(t *rapid.T) {
		spec := instance.Spec{Init: str.Draw(t, "init"), Tags: tags.Draw(t, "spec tags"), Attachments: atts.Draw(t, "spec atts")}
		p := Properties{Init: rapid.SliceOf(str).Draw(t, "lines"), Tags: tags.Draw(t, "tags"), Attachments: atts.Draw(t, "atts")}
		before := instance.Spec{Init: spec.Init, Tags: maps.Clone(spec.Tags), Attachments: slices.Clone(spec.Attachments)}
		got := Apply(p, spec)

		if !reflect.DeepEqual(spec.Tags, before.Tags) || !slices.Equal(spec.Attachments, before.Attachments) {
			t.Fatal("Apply changed its input")
		}
		if !strings.HasPrefix(got.Init, spec.Init) {
			t.Fatalf("init %q lost the spec's %q", got.Init, spec.Init)
		}
		if len(p.Init) > 0 && !strings.HasSuffix(got.Init, strings.Join(p.Init, "\n")) {
			t.Fatalf("init %q does not end with the flavor's lines %q", got.Init, p.Init)
		}
		for k, v := range spec.Tags {
			if _, flavorHas := p.Tags[k]; !flavorHas && got.Tags[k] != v {
				t.Fatalf("spec tag %s lost", k)
			}
		}
		for k, v := range p.Tags {
			if got.Tags[k] != v {
				t.Fatalf("flavor tag %s=%s did not win: %v", k, v, got.Tags)
			}
		}
		if !slices.Equal(got.Attachments, append(slices.Clone(spec.Attachments), p.Attachments...)) {
			t.Fatalf("attachments %v", got.Attachments)
		}
		// Prepare through JSON gives the same as Apply.
		raw, _ := json.Marshal(map[string]any{"init": p.Init, "tags": p.Tags, "attachments": p.Attachments})
		viaJSON, err := Flavor{}.Prepare(context.Background(), raw, spec, flavor.Allocation{}, flavor.Index{})
		if err != nil {
			t.Fatal(err)
		}
		if viaJSON.Init != got.Init || !maps.Equal(viaJSON.Tags, got.Tags) || !slices.Equal(viaJSON.Attachments, got.Attachments) {
			t.Fatalf("Prepare %+v != Apply %+v", viaJSON, got)
		}
	})
}
