//go:build linux

package process

import (
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/infrakit/infrakit/sdk/provider"
)

func TestParse(t *testing.T) {
	defaults := Properties{Ports: PortRange{DefaultPortFrom, DefaultPortTo}, KillTimeout: DefaultKillTimeout}
	with := func(f func(*Properties)) Properties {
		p := defaults
		f(&p)
		return p
	}
	for _, tc := range []struct {
		name  string
		props string
		want  Properties
	}{
		{"command only", `{"command": "webserver"}`, with(func(p *Properties) { p.Command = "webserver" })},
		{"everything", `{"command": "./bin/web", "args": ["-v", ""], "env": {"MODE": "x", "EMPTY": ""}, "dir": "www",
			"ports": {"from": 8000, "to": 8009}, "kill_timeout": "250ms"}`, Properties{
			Command: "./bin/web", Args: []string{"-v", ""}, Env: map[string]string{"MODE": "x", "EMPTY": ""}, Dir: "www",
			Ports: PortRange{8000, 8009}, KillTimeout: 250 * time.Millisecond,
		}},
		{"nulls are absent", `{"command": "x", "args": null, "env": null, "dir": null, "ports": null, "kill_timeout": null}`,
			with(func(p *Properties) { p.Command = "x" })},
		{"one port", `{"command": "x", "ports": {"from": 9000, "to": 9000}}`,
			with(func(p *Properties) { p.Command = "x"; p.Ports = PortRange{9000, 9000} })},
		{"no grace", `{"command": "x", "kill_timeout": "0s"}`,
			with(func(p *Properties) { p.Command = "x"; p.KillTimeout = 0 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(json.RawMessage(tc.props))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseDiagnostics(t *testing.T) {
	type want struct{ path, summary, detail string }
	for _, tc := range []struct {
		name  string
		props string
		want  []want
	}{
		{"absent", ``, []want{{"command", "Missing required argument", "needs a command"}}},
		{"null", `null`, []want{{"command", "Missing required argument", ""}}},
		{"not an object", `["x"]`, []want{{"", "Invalid properties", "got list"}}},
		{"invalid JSON", `{"command": `, []want{{"", "Invalid properties", "invalid JSON"}}},
		{"no command", `{"args": ["x"]}`, []want{{"command", "Missing required argument", ""}}},
		{"command type", `{"command": 3}`, []want{{"command", "Incorrect attribute value type", "got number"}}},
		{"empty command", `{"command": " "}`, []want{{"command", "Invalid value", "empty"}}},
		{"args element", `{"command": "x", "args": ["a", 1, true]}`, []want{
			{"args.1", "Incorrect attribute value type", "got number"},
			{"args.2", "Incorrect attribute value type", "got bool"},
		}},
		{"args type", `{"command": "x", "args": "a b"}`, []want{{"args", "Incorrect attribute value type", "list of strings"}}},
		{"env value", `{"command": "x", "env": {"A": 1}}`, []want{{"env.A", "Incorrect attribute value type", "got number"}}},
		{"env reserved", `{"command": "x", "env": {"PORT": "80", "INFRAKIT_INSTANCE_ID": "i"}}`, []want{
			{"env.INFRAKIT_INSTANCE_ID", "Reserved environment variable", "set by the process provider"},
			{"env.PORT", "Reserved environment variable", ""},
		}},
		{"env name", `{"command": "x", "env": {"A=B": "c"}}`, []want{{"env.A=B", "Invalid environment variable name", ""}}},
		{"dir type", `{"command": "x", "dir": ["a"]}`, []want{{"dir", "Incorrect attribute value type", ""}}},
		{"ports type", `{"command": "x", "ports": "20000-20999"}`, []want{{"ports", "Invalid properties", "Ports must be an object, got string"}}},
		{"ports missing to", `{"command": "x", "ports": {"from": 1}}`, []want{{"ports.to", "Missing required argument", ""}}},
		{"ports fraction", `{"command": "x", "ports": {"from": 1.5, "to": 2}}`, []want{{"ports.from", "Incorrect attribute value type", "whole number, got 1.5"}}},
		{"ports out of range", `{"command": "x", "ports": {"from": 0, "to": 70000}}`, []want{
			{"ports.from", "Invalid port", ""},
			{"ports.to", "Invalid port", "70000"},
		}},
		{"ports reversed", `{"command": "x", "ports": {"from": 30000, "to": 20000}}`, []want{{"ports", "Invalid port range", "above"}}},
		{"ports extra", `{"command": "x", "ports": {"from": 1, "to": 2, "step": 1}}`, []want{{"ports.step", "Unsupported argument", `"from", "to"`}}},
		{"kill_timeout", `{"command": "x", "kill_timeout": "soon"}`, []want{{"kill_timeout", "Invalid duration", `"soon"`}}},
		{"kill_timeout negative", `{"command": "x", "kill_timeout": "-1s"}`, []want{{"kill_timeout", "Invalid duration", "negative"}}},
		{"kill_timeout number", `{"command": "x", "kill_timeout": 5}`, []want{{"kill_timeout", "Incorrect attribute value type", ""}}},
		{"unknown", `{"command": "x", "colour": "red"}`, []want{{"colour", "Unsupported argument", `"command", "args"`}}},
		{"several", `{"args": [1], "colour": "red"}`, []want{
			{"colour", "Unsupported argument", ""},
			{"command", "Missing required argument", ""},
			{"args.0", "Incorrect attribute value type", ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(json.RawMessage(tc.props))
			var diags provider.Diagnostics
			if !errors.As(err, &diags) {
				t.Fatalf("Parse = %v, want provider.Diagnostics", err)
			}
			if len(diags) != len(tc.want) {
				t.Fatalf("got %d diagnostics, want %d: %v", len(diags), len(tc.want), diags)
			}
			for i, w := range tc.want {
				d := diags[i]
				if got := strings.Join(d.Path, "."); got != w.path || d.Summary != w.summary || !strings.Contains(d.Detail, w.detail) || d.Severity != provider.Error {
					t.Errorf("diagnostic %d = %q %q %q (severity %d), want %q %q containing %q", i, got, d.Summary, d.Detail, d.Severity, w.path, w.summary, w.detail)
				}
			}
		})
	}
}

// TestSchema: the schema lists exactly what Parse accepts, its types are
// HCL type constraints, and properties Parse accepts conform to it (infrakit
// validate checks stacks against the schema before the provider sees them).
func TestSchema(t *testing.T) {
	s := Schema()
	if got := slices.Sorted(maps.Keys(s.Attributes)); !slices.Equal(got, slices.Sorted(slices.Values(topKeys))) {
		t.Fatalf("schema attributes %v, Parse accepts %v", got, topKeys)
	}
	if !s.Attributes["command"].Required || s.Open {
		t.Fatal("command must be required and the schema closed")
	}
	valid := map[string]string{
		"command": `"x"`, "args": `["a"]`, "env": `{"A": "b"}`, "dir": `"d"`,
		"ports": `{"from": 1, "to": 2}`, "kill_timeout": `"1s"`,
	}
	for name, a := range s.Attributes {
		expr, diags := hclsyntax.ParseExpression([]byte(a.Type), "type", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", name, diags)
		}
		ty, diags := typeexpr.TypeConstraint(expr)
		if diags.HasErrors() {
			t.Fatalf("%s: type %q: %v", name, a.Type, diags)
		}
		if _, err := ctyjson.Unmarshal([]byte(valid[name]), ty); err != nil {
			t.Errorf("%s = %s does not conform to its schema type %s: %v", name, valid[name], a.Type, err)
		}
		if a.Description == "" {
			t.Errorf("%s has no description", name)
		}
	}
	md := Metadata("1.2.3")
	if o, ok := md.Find(provider.KindInstance, Type); !ok || md.Name != Name || !reflect.DeepEqual(o.Schema, s) {
		t.Fatalf("Metadata = %+v", md)
	}
}
