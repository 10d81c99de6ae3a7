package providertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/provider"
)

func TestCheckDiagnostics(t *testing.T) {
	attr := provider.AttributeError("bad init line", "", "init", "1")
	for _, tc := range []struct {
		name string
		err  error
		path []string
		want string // substring of the complaint; "" means accepted
	}{
		{"nil is acceptance", nil, []string{"init"}, "accepted invalid properties"},
		{"plain error", errors.New("boom"), nil, "not provider.Diagnostics"},
		{"exact path", attr, []string{"init", "1"}, ""},
		{"wrapped by the client", fmt.Errorf("provider %q: Validate: %w", "vanilla", attr), []string{"init", "1"}, ""},
		{"other path", attr, []string{"init", "0"}, `no error diagnostic with path ["init" "0"]`},
		{"prefix is not enough", attr, []string{"init"}, "no error diagnostic"},
		{"whole object", provider.AttributeError("not an object", ""), nil, ""},
		{"nil path matches empty path", provider.Diagnostics{{Severity: provider.Error, Path: []string{}}}, nil, ""},
		{"warning does not count", provider.Diagnostics{
			{Severity: provider.Warning, Summary: "deprecated", Path: []string{"init", "1"}},
			{Severity: provider.Error, Summary: "bad", Path: []string{"tags"}},
		}, []string{"init", "1"}, "no error diagnostic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkDiagnostics(tc.err, tc.path)
			switch {
			case tc.want == "" && got != nil:
				t.Errorf("complaint %v, want acceptance", got)
			case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
				t.Errorf("complaint %v, want one containing %q", got, tc.want)
			}
		})
	}
}

func TestContainsTagsProperties(t *testing.T) {
	tagMap := rapid.MapOf(rapid.StringMatching(`[a-z.]{1,6}`), rapid.StringMatching(`[a-z0-9]{0,4}`))
	rapid.Check(t, func(t *rapid.T) {
		got, want := tagMap.Draw(t, "got"), tagMap.Draw(t, "want")
		merged := maps.Clone(got)
		maps.Copy(merged, want)
		if miss, ok := containsTags(merged, want); !ok {
			t.Fatalf("tags with every wanted tag merged in lack %s", miss)
		}
		if _, ok := containsTags(got, map[string]string{}); !ok {
			t.Fatal("every tag set carries the empty set")
		}
		if len(want) == 0 {
			return
		}
		k := rapid.SampledFrom(keys(want)).Draw(t, "key")
		without := maps.Clone(merged)
		delete(without, k)
		if _, ok := containsTags(without, want); ok {
			t.Fatalf("tags without %q pass as carrying %v", k, want)
		}
		changed := maps.Clone(merged)
		changed[k] += "x"
		if _, ok := containsTags(changed, want); ok {
			t.Fatalf("tags with %q changed pass as carrying %v", k, want)
		}
	})
}

func TestCheckDescribedAndGone(t *testing.T) {
	lid := instance.LogicalID("pet-1")
	other := instance.LogicalID("pet-2")
	spec := instance.Spec{Tags: map[string]string{"a": "1"}, LogicalID: &lid}
	ok := instance.Description{ID: "i-1", LogicalID: &lid, Tags: map[string]string{"a": "1", "extra": "x"}, State: instance.StatePending}
	with := func(f func(*instance.Description)) instance.Description { d := ok; f(&d); return d }
	for _, tc := range []struct {
		name string
		ds   []instance.Description
		want string
	}{
		{"pending with tags", []instance.Description{ok}, ""},
		{"running", []instance.Description{with(func(d *instance.Description) { d.State = instance.StateRunning })}, ""},
		{"absent", nil, "0 times"},
		{"twice", []instance.Description{ok, ok}, "2 times"},
		{"another instance too", []instance.Description{ok, with(func(d *instance.Description) { d.ID = "i-2" })}, "lists 2 instances"},
		{"terminating", []instance.Description{with(func(d *instance.Description) { d.State = instance.StateTerminating })}, `state is "terminating"`},
		{"lost a tag", []instance.Description{with(func(d *instance.Description) { d.Tags = map[string]string{"extra": "x"} })}, "lacks tag a="},
		{"no logical ID", []instance.Description{with(func(d *instance.Description) { d.LogicalID = nil })}, "without one"},
		{"other logical ID", []instance.Description{with(func(d *instance.Description) { d.LogicalID = &other })}, `"pet-2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkDescribed(tc.ds, "i-1", spec)
			if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkDescribed = %v, want %q", err, tc.want)
			}
		})
	}

	if err := checkGone(nil, "i-1"); err != nil {
		t.Errorf("absent instance: %v", err)
	}
	if err := checkGone([]instance.Description{with(func(d *instance.Description) { d.State = instance.StateTerminating })}, "i-1"); err != nil {
		t.Errorf("terminating instance: %v", err)
	}
	if err := checkGone([]instance.Description{ok}, "i-1"); err == nil {
		t.Error("a pending instance passes as destroyed")
	}
}

func TestCheckMetadata(t *testing.T) {
	good := provider.Metadata{Name: "simulator", Version: "0.1.0", Objects: []provider.Object{
		{Kind: provider.KindInstance, Type: "compute", Schema: provider.Schema{Attributes: map[string]provider.Attribute{
			"note": {Type: "string"}, "cpus": {Type: "number"}, "labels": {Type: "map(string)"}, "any": {Type: "any"},
		}}},
		{Kind: provider.KindLoadBalancer, Type: provider.AnyName},
		{Kind: provider.KindMetrics, Type: "promql"},
	}}
	if errs := checkMetadata(good); len(errs) != 0 {
		t.Fatalf("good metadata: %v", errs)
	}
	for _, tc := range []struct {
		name   string
		change func(*provider.Metadata)
		want   string
	}{
		{"no name", func(m *provider.Metadata) { m.Name = "" }, "name"},
		{"name with alias separator", func(m *provider.Metadata) { m.Name = "sim.nfs" }, "name"},
		{"no version", func(m *provider.Metadata) { m.Version = "" }, "version"},
		{"version with slash", func(m *provider.Metadata) { m.Version = "1/2" }, "version"},
		{"no objects", func(m *provider.Metadata) { m.Objects = nil }, "no objects"},
		{"unknown kind", func(m *provider.Metadata) { m.Objects[0].Kind = "storage" }, "unknown kind"},
		{"no type", func(m *provider.Metadata) { m.Objects[0].Type = "" }, "no type"},
		{"any instance type", func(m *provider.Metadata) { m.Objects[0].Type = provider.AnyName }, "any name"},
		{"duplicate", func(m *provider.Metadata) { m.Objects = append(m.Objects, m.Objects[0]) }, "twice"},
		{"bad attribute type", func(m *provider.Metadata) {
			m.Objects[0].Schema.Attributes = map[string]provider.Attribute{"x": {Type: "lst(string)"}}
		}, `attribute "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := good
			m.Objects = append([]provider.Object(nil), good.Objects...)
			tc.change(&m)
			errs := checkMetadata(m)
			if len(errs) == 0 || !strings.Contains(errors.Join(errs...).Error(), tc.want) {
				t.Errorf("checkMetadata = %v, want a complaint about %q", errs, tc.want)
			}
		})
	}
}

func TestCheckSchema(t *testing.T) {
	schema := provider.Schema{Attributes: map[string]provider.Attribute{
		"init": {Type: "list(string)"},
		"size": {Type: "number", Required: true},
		"meta": {Type: "any"},
	}}
	open := schema
	open.Open = true
	for _, tc := range []struct {
		name   string
		schema provider.Schema
		props  string
		want   string
	}{
		{"conforming", schema, `{"size": 2, "init": ["a", "b"]}`, ""},
		{"any takes anything", schema, `{"size": 2, "meta": {"x": [1, "y"]}}`, ""},
		{"required missing", schema, `{"init": []}`, `required attribute "size"`},
		{"required null", schema, `{"size": null}`, `required attribute "size"`},
		{"wrong type", schema, `{"size": 2, "init": "a"}`, `attribute "init"`},
		{"unknown attribute, closed", schema, `{"size": 2, "colour": "red"}`, `"colour"`},
		{"unknown attribute, open", open, `{"size": 2, "colour": "red"}`, ""},
		{"not an object", schema, `[1]`, "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := checkSchema(tc.schema, json.RawMessage(tc.props))
			err := errors.Join(errs...)
			if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkSchema = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCheckPrepared(t *testing.T) {
	lid := instance.LogicalID("pet-1")
	in := instance.Spec{
		Properties:  json.RawMessage(`{"a": 1, "b": [true]}`),
		Tags:        map[string]string{"t": "1"},
		Init:        "echo in",
		LogicalID:   &lid,
		Attachments: []instance.Attachment{{ID: "vol-1", Type: "volume"}},
	}
	with := func(f func(*instance.Spec)) instance.Spec { s := in; f(&s); return s }
	for _, tc := range []struct {
		name string
		out  instance.Spec
		want string
	}{
		{"unchanged", in, ""},
		{"added to", with(func(s *instance.Spec) {
			s.Tags = map[string]string{"t": "1", "tier": "web"}
			s.Init = "apt-get update\necho in\n"
			s.Properties = json.RawMessage(`{"b":[true],"a":1}`)
			s.Attachments = append(s.Attachments, instance.Attachment{ID: "ip", Type: "eip"})
		}), ""},
		{"tag overwritten", with(func(s *instance.Spec) { s.Tags = map[string]string{"t": "2"} }), "lacks tag t="},
		{"init replaced", with(func(s *instance.Spec) { s.Init = "echo out" }), "does not contain"},
		{"logical ID lost", with(func(s *instance.Spec) { s.LogicalID = nil }), "logical ID"},
		{"properties lost", with(func(s *instance.Spec) { s.Properties = nil }), "lost the instance properties"},
		{"properties changed", with(func(s *instance.Spec) { s.Properties = json.RawMessage(`{"a": 2}`) }), "changed the instance properties"},
		{"attachment lost", with(func(s *instance.Spec) { s.Attachments = nil }), "attachment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkPrepared(in, tc.out)
			if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkPrepared = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCheckEvent(t *testing.T) {
	tags := map[string]string{TagCase: "c1"}
	desc := &instance.Description{ID: "i-1", Tags: map[string]string{TagCase: "c1", "x": "y"}}
	for _, tc := range []struct {
		name string
		e    instance.Event
		want string
	}{
		{"changed", instance.Event{Type: instance.EventChanged, ID: "i-1", Instance: desc}, ""},
		{"gone", instance.Event{Type: instance.EventGone, ID: "i-1"}, ""},
		{"gone without ID", instance.Event{Type: instance.EventGone}, "without an ID"},
		{"changed without instance", instance.Event{Type: instance.EventChanged, ID: "i-1"}, "without the instance"},
		{"changed, other instance", instance.Event{Type: instance.EventChanged, ID: "i-2", Instance: desc}, `describes instance "i-1"`},
		{"not matching the watch", instance.Event{Type: instance.EventChanged, ID: "i-3",
			Instance: &instance.Description{ID: "i-3", Tags: map[string]string{TagCase: "c2"}}}, "lacks"},
		{"unknown type", instance.Event{Type: "moved", ID: "i-1"}, "unknown type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkEvent(tc.e, tags)
			if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("checkEvent = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestJSONEqual(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.MapOf(rapid.StringMatching(`[a-z]{1,5}`), rapid.IntRange(-1000, 1000)).Draw(t, "m")
		a, _ := json.Marshal(m)
		b, _ := json.MarshalIndent(m, "", "  ")
		if eq, err := jsonEqual(a, b); err != nil || !eq {
			t.Fatalf("%s and %s: equal=%v err=%v", a, b, eq, err)
		}
		m["zz_extra"] = 1
		c, _ := json.Marshal(m)
		if eq, _ := jsonEqual(a, c); eq {
			t.Fatalf("%s equals %s", a, c)
		}
	})
}

func TestCheckRefused(t *testing.T) {
	diags := provider.AttributeError("Invalid query", "parse error", "query")
	for _, tc := range []struct {
		name string
		err  error
		want string // substring of the complaint; "" means accepted
	}{
		{"diagnostics", diags, ""},
		{"wrapped by the client", fmt.Errorf("provider %q: Query: %w", "prometheus", diags), ""},
		{"any path", provider.AttributeError("Invalid query", ""), ""},
		{"nil is acceptance", nil, "accepted"},
		{"plain error", errors.New("connection refused"), "not provider.Diagnostics"},
		{"warnings only", provider.Diagnostics{{Severity: provider.Warning, Summary: "slow"}}, "not provider.Diagnostics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkRefused(tc.err)
			if (tc.want == "") != (got == nil) || got != nil && !strings.Contains(got.Error(), tc.want) {
				t.Errorf("checkRefused = %v, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckSample(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		sample metrics.Sample
		err    error
		at     time.Time
		want   string
	}{
		{"value now", metrics.Sample{Value: 3, At: at}, nil, time.Time{}, ""},
		{"zero is a value", metrics.Sample{At: at}, nil, time.Time{}, ""},
		{"at the time asked", metrics.Sample{Value: 3, At: at}, nil, at, ""},
		{"the sample's own earlier time", metrics.Sample{Value: 3, At: at.Add(-15 * time.Second)}, nil, at, ""},
		{"within the slack", metrics.Sample{Value: 3, At: at.Add(time.Second)}, nil, at, ""},
		{"error", metrics.Sample{}, errors.New("connection refused"), time.Time{}, "no value: connection refused"},
		{"empty", metrics.Sample{Empty: true, At: at}, nil, time.Time{}, "answered no data"},
		{"no time", metrics.Sample{Value: 3}, nil, time.Time{}, "says no time"},
		{"after the time asked", metrics.Sample{Value: 3, At: at.Add(time.Minute)}, nil, at, "after it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := checkSample(tc.sample, tc.err, tc.at)
			if (tc.want == "") != (got == nil) || got != nil && !strings.Contains(got.Error(), tc.want) {
				t.Errorf("checkSample = %v, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckEmptySample(t *testing.T) {
	if err := checkEmptySample(metrics.Sample{Empty: true}, nil); err != nil {
		t.Errorf("empty sample: %v", err)
	}
	if err := checkEmptySample(metrics.Sample{}, nil); err == nil || !strings.Contains(err.Error(), "the value 0 instead of no data") {
		t.Errorf("0 for no data: %v", err)
	}
	if err := checkEmptySample(metrics.Sample{}, errors.New("no series")); err == nil || !strings.Contains(err.Error(), "not an error") {
		t.Errorf("an error for no data: %v", err)
	}
}
