package healthcheck

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
	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/provider"
)

func TestParse(t *testing.T) {
	def := Properties{Timeout: time.Second, Thresholds: Thresholds{Healthy: 1, Unhealthy: 2}}
	with := func(f func(*Properties)) Properties {
		p := def
		f(&p)
		return p
	}
	for _, tc := range []struct {
		name, props string
		want        Properties
	}{
		{"absent", ``, def},
		{"null", `null`, def},
		{"empty", `{}`, def},
		{"tcp", `{"tcp": true}`, def},
		{"http defaults", `{"http": {}}`, with(func(p *Properties) { p.HTTP = &HTTPCheck{"/", 200} })},
		{"http null fields", `{"http": {"path": null, "expect_status": null}, "tcp": null}`, with(func(p *Properties) { p.HTTP = &HTTPCheck{"/", 200} })},
		{"http with tcp false", `{"tcp": false, "http": {"path": "/health"}}`, with(func(p *Properties) { p.HTTP = &HTTPCheck{"/health", 200} })},
		{"everything", `{"http": {"path": "/ready?deep=1", "expect_status": 204}, "port": 8081, "timeout": "250ms",
			"healthy_threshold": 3, "unhealthy_threshold": 1}`, Properties{
			HTTP: &HTTPCheck{"/ready?deep=1", 204}, Port: 8081, Timeout: 250 * time.Millisecond,
			Thresholds: Thresholds{Healthy: 3, Unhealthy: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(json.RawMessage(tc.props))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse = %+v (http %+v), want %+v (http %+v)", got, got.HTTP, tc.want, tc.want.HTTP)
			}
		})
	}
}

func TestParseDiagnostics(t *testing.T) {
	type want struct{ path, summary, detail string }
	for _, tc := range []struct {
		name, props string
		want        []want
	}{
		{"not an object", `[1]`, []want{{"", "Invalid properties", "got list"}}},
		{"both checks", `{"tcp": true, "http": {}}`, []want{{"tcp", "Conflicting checks", "not both"}}},
		{"no check", `{"tcp": false}`, []want{{"tcp", "No check", "nothing to probe"}}},
		{"tcp type", `{"tcp": "yes"}`, []want{{"tcp", "Incorrect attribute value type", "true or false, got string"}}},
		{"http type", `{"http": "/health"}`, []want{{"http", "Invalid properties", "Http must be an object, got string"}}},
		{"http path", `{"http": {"path": "health"}}`, []want{{"http.path", "Invalid path", `start with "/"`}}},
		{"http status", `{"http": {"expect_status": 999}}`, []want{{"http.expect_status", "Invalid status", "999"}}},
		{"http status type", `{"http": {"expect_status": "200"}}`, []want{{"http.expect_status", "Incorrect attribute value type", "got string"}}},
		{"http extra", `{"http": {"method": "HEAD"}}`, []want{{"http.method", "Unsupported argument", `"path", "expect_status"`}}},
		{"port", `{"port": 0}`, []want{{"port", "Invalid port", ""}}},
		{"port fraction", `{"port": 80.5}`, []want{{"port", "Incorrect attribute value type", "80.5"}}},
		{"timeout", `{"timeout": "soon"}`, []want{{"timeout", "Invalid duration", `"soon"`}}},
		{"timeout zero", `{"timeout": "0s"}`, []want{{"timeout", "Invalid duration", "positive"}}},
		{"timeout number", `{"timeout": 1}`, []want{{"timeout", "Incorrect attribute value type", ""}}},
		{"thresholds", `{"healthy_threshold": 0, "unhealthy_threshold": -1}`, []want{
			{"healthy_threshold", "Invalid threshold", "at least 1, got 0"},
			{"unhealthy_threshold", "Invalid threshold", "got -1"},
		}},
		{"unknown", `{"interval": "5s"}`, []want{{"interval", "Unsupported argument", `"tcp", "http", "port"`}}},
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
				if got := strings.Join(d.Path, "."); got != w.path || d.Summary != w.summary || !strings.Contains(d.Detail, w.detail) {
					t.Errorf("diagnostic %d = %q %q %q, want %q %q containing %q", i, got, d.Summary, d.Detail, w.path, w.summary, w.detail)
				}
			}
		})
	}
}

func TestSchema(t *testing.T) {
	s := Schema()
	if got := slices.Sorted(maps.Keys(s.Attributes)); !slices.Equal(got, slices.Sorted(slices.Values(topKeys))) {
		t.Fatalf("schema attributes %v, Parse accepts %v", got, topKeys)
	}
	valid := map[string]string{
		"tcp": `true`, "http": `{"path": "/health"}`, "port": `8081`, "timeout": `"1s"`,
		"healthy_threshold": `2`, "unhealthy_threshold": `3`,
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
			t.Errorf("%s = %s does not conform to %s: %v", name, valid[name], a.Type, err)
		}
		if a.Required || a.Description == "" {
			t.Errorf("%s: required %v, description %q", name, a.Required, a.Description)
		}
	}
	if o, ok := Metadata("1.0.0").Find(provider.KindFlavor, Type); !ok || !reflect.DeepEqual(o.Schema, s) {
		t.Fatal("Metadata does not serve the flavor with its schema")
	}
}

func TestCounter(t *testing.T) {
	th := Thresholds{Healthy: 2, Unhealthy: 3}
	var c Counter
	steps := []struct {
		ok   bool
		want flavor.Health
	}{
		{true, flavor.HealthUnknown}, // 1 of 2 successes
		{false, flavor.HealthUnknown},
		{true, flavor.HealthUnknown},
		{true, flavor.HealthHealthy}, // 2 in a row
		{false, flavor.HealthHealthy},
		{false, flavor.HealthHealthy},
		{true, flavor.HealthHealthy}, // the failure run broke before 3
		{false, flavor.HealthHealthy},
		{false, flavor.HealthHealthy},
		{false, flavor.HealthUnhealthy}, // 3 in a row
		{true, flavor.HealthUnhealthy},
		{true, flavor.HealthHealthy},
	}
	if c.Health() != flavor.HealthUnknown {
		t.Fatal("a fresh counter is not unknown")
	}
	for i, s := range steps {
		c = c.Observe(s.ok, th)
		if c.Health() != s.want {
			t.Fatalf("step %d (ok=%v): %s, want %s (%+v)", i, s.ok, c.Health(), s.want, c)
		}
	}
}

// TestCounterModel: after any sequence of probes the verdict is that of the
// latest run of equal results long enough for its threshold, or unknown when
// there is none; the counters are the length of the current run.
func TestCounterModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		th := Thresholds{Healthy: rapid.IntRange(1, 4).Draw(t, "healthy"), Unhealthy: rapid.IntRange(1, 4).Draw(t, "unhealthy")}
		results := rapid.SliceOf(rapid.Bool()).Draw(t, "results")
		var c Counter
		for _, ok := range results {
			c = c.Observe(ok, th)
		}
		want := flavor.HealthUnknown
		run := 0
		for i := len(results) - 1; i >= 0; i-- {
			run++
			if i > 0 && results[i-1] == results[i] {
				continue // the run goes on further back
			}
			// results[i:i+run] is a maximal run.
			if results[i] && run >= th.Healthy {
				want = flavor.HealthHealthy
				break
			}
			if !results[i] && run >= th.Unhealthy {
				want = flavor.HealthUnhealthy
				break
			}
			run = 0
		}
		if c.Health() != want {
			t.Fatalf("verdict %s, model says %s", c.Health(), want)
		}
		cur := 0
		for i := len(results) - 1; i >= 0 && results[i] == results[len(results)-1]; i-- {
			cur++
		}
		if len(results) > 0 {
			if last := results[len(results)-1]; (last && c.Successes != cur) || (!last && c.Failures != cur) || (c.Successes > 0 && c.Failures > 0) {
				t.Fatalf("counters %+v, current run %d of %v", c, cur, last)
			}
		}
	})
}

func TestTarget(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		port   int
		http   bool
		want   string
		errSub string
	}{
		{"127.0.0.1:20001", 0, false, "127.0.0.1:20001", ""},
		{"127.0.0.1:20001", 9000, true, "127.0.0.1:9000", ""},
		{"10.0.0.1", 0, true, "10.0.0.1:80", ""},
		{"10.0.0.1", 22, false, "10.0.0.1:22", ""},
		{"10.0.0.1", 0, false, "", "no port"},
		{"[::1]:8080", 0, false, "[::1]:8080", ""},
		{"::1", 0, true, "[::1]:80", ""},
		{"[::1]", 0, true, "[::1]:80", ""},
		{"web.internal", 0, true, "web.internal:80", ""},
		{":8080", 0, false, "", "no host"},
	} {
		got, err := target(tc.addr, tc.port, tc.http)
		if tc.errSub != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errSub) {
				t.Errorf("target(%q, %d, %v) = %q, %v; want an error about %s", tc.addr, tc.port, tc.http, got, err, tc.errSub)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("target(%q, %d, %v) = %q, %v; want %q", tc.addr, tc.port, tc.http, got, err, tc.want)
		}
	}
}
