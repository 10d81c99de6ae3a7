package config_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/provider"
)

// autoscaleGroup is a stack with one group "web" whose allocation line is
// alloc (line 5) and whose autoscale block (line 11) holds body, starting
// at line 12.
func autoscaleGroup(alloc, body string) string {
	return `stack "s" {}
provider "sim" {}
provider "prom" {}
group "web" {
  ` + alloc + `
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
  autoscale {
` + body + `  }
}
`
}

// bounds are the min and max lines of a body (lines 12 and 13).
const bounds = "    min = 2\n    max = 12\n"

// rpsCheck is a check block (lines 14 to 18 after bounds) whose source
// and target are given.
func rpsCheck(source, target string) string {
	return `    check "rps" {
      source              = ` + source + `
      query               = "sum(rate(web_requests_total{infrakit_group=\"web\"}[30s]))"
      target_per_instance = ` + target + `
    }
`
}

var validCheck = rpsCheck("prom", "50")

func loadString(src string) (*config.Stack, string, []string) {
	st, diags := config.LoadSources(map[string][]byte{"stack.hcl": []byte(src)})
	var errs []string
	for _, d := range errorsOf(diags) {
		errs = append(errs, pos("", d.Subject)+" "+d.Summary+": "+d.Detail)
	}
	return st, render(st, diags), errs
}

// TestAutoscaleInvalid: each mistake is one error, at the place, with its
// summary and the words that say what to do.
func TestAutoscaleInvalid(t *testing.T) {
	tests := []struct {
		name, alloc, body  string
		pos, summary, want string
	}{
		{"min more than max", "size = 3", "    min = 5\n    max = 3\n" + validCheck,
			"stack.hcl:12:11", "Invalid autoscale bounds", "min (5) must be at most max (3, set at stack.hcl:13:11)"},
		{"size above max", "size = 20", bounds + validCheck,
			"stack.hcl:5:10", "Size outside autoscale bounds", "between min = 2 and max = 12 (set at stack.hcl:12:11), so its size, the start size, must be within them; got 20"},
		{"size below min", "size = 1", bounds + validCheck,
			"stack.hcl:5:10", "Size outside autoscale bounds", "got 1. Leave size out to start at min"},
		{"pets", `logical_ids = ["a", "b"]`, bounds + validCheck,
			"stack.hcl:11:3", "Autoscale on pets", "Only cattle autoscale: a group of pets has one instance per logical ID (listed at stack.hcl:5:3)"},
		{"missing check", "size = 2", bounds,
			"stack.hcl:11:3", "Missing check block", "at least one check block"},
		{"missing min", "size = 2", "    max = 12\n" + validCheck,
			"stack.hcl:11:13", "Missing required argument", `"min" is required`},
		{"negative min", "size = 2", "    min = -1\n    max = 12\n" + validCheck,
			"stack.hcl:12:11", "Invalid value", `"min" must be at least 0; got -1`},
		{"max zero", "size = 0", "    min = 0\n    max = 0\n" + validCheck,
			"stack.hcl:13:11", "Invalid value", `"max" must be at least 1; got 0`},
		{"max over the group limit", "size = 2", "    min = 2\n    max = 200000\n" + validCheck,
			"stack.hcl:13:11", "Group too large", "200000 instances is more than the stack allows (100000"},
		{"fractional max", "size = 2", "    min = 2\n    max = 2.5\n" + validCheck,
			"stack.hcl:13:11", "Invalid value", "whole number; got 2.5"},
		{"target zero", "size = 2", bounds + rpsCheck("prom", "0"),
			"stack.hcl:17:29", "Invalid value", `"target_per_instance" must be a finite number greater than 0; got 0`},
		{"target negative", "size = 2", bounds + rpsCheck("prom", "-5"),
			"stack.hcl:17:29", "Invalid value", "greater than 0; got -5"},
		{"target too large for a float", "size = 2", bounds + rpsCheck("prom", "1e400"),
			"stack.hcl:17:29", "Invalid value", "finite number greater than 0; got 1e+400"},
		{"target not a number", "size = 2", bounds + rpsCheck("prom", `"many"`),
			"stack.hcl:17:29", "Incorrect attribute value type", "a number is required"},
		{"unknown source", "size = 2", bounds + rpsCheck("promx", "50"),
			"stack.hcl:15:29", "Reference to undeclared provider", `No provider "promx" is declared; declare it with provider "promx" {}. Did you mean prom?`},
		{"quoted source", "size = 2", bounds + rpsCheck(`"prom"`, "50"),
			"stack.hcl:15:29", "Invalid reference", "not a string: write prom without quotes"},
		{"source of another kind", "size = 2", bounds + rpsCheck("group.web", "50"),
			"stack.hcl:15:29", "Invalid provider reference", "refers to a group, not a provider"},
		{"duplicate check", "size = 2", bounds + validCheck + validCheck,
			"stack.hcl:19:11", "Duplicate check", `A check named "rps" is already declared at stack.hcl:14:5`},
		{"check name", "size = 2", bounds + strings.Replace(validCheck, `"rps"`, `"r p s"`, 1),
			"stack.hcl:14:11", "Invalid check name", `"r p s" cannot be referenced`},
		{"empty query", "size = 2", bounds + strings.Replace(validCheck, `"sum(rate(web_requests_total{infrakit_group=\"web\"}[30s]))"`, `""`, 1),
			"stack.hcl:16:29", "Invalid value", `The argument "query" must not be empty`},
		{"missing query", "size = 2", bounds + "    check \"rps\" {\n      source = prom\n      target_per_instance = 1\n    }\n",
			"stack.hcl:14:17", "Missing required argument", `"query" is required`},
		{"bad duration", "size = 2", bounds + "    evaluation_interval = \"10 seconds\"\n" + validCheck,
			"stack.hcl:14:27", "Invalid duration", `"10 seconds" is not one`},
		{"evaluation interval under 1s", "size = 2", bounds + "    evaluation_interval = \"500ms\"\n" + validCheck,
			"stack.hcl:14:27", "Invalid duration", `"evaluation_interval" must be at least 1s; got 500ms`},
		{"negative cooldown", "size = 2", bounds + "    cooldown = \"-1s\"\n" + validCheck,
			"stack.hcl:14:16", "Invalid duration", `"cooldown" must be at least 0s; got -1s`},
		{"negative max_step", "size = 2", bounds + validCheck + "    scale_up { max_step = -1 }\n",
			"stack.hcl:19:27", "Invalid value", `"max_step" must be at least 0; got -1`},
		{"negative stabilization", "size = 2", bounds + validCheck + "    scale_down { stabilization = \"-2m\" }\n",
			"stack.hcl:19:34", "Invalid duration", `"stabilization" must be at least 0s`},
		{"two arguments on one line", "size = 2", bounds + validCheck + "    scale_down { stabilization = \"2m\", max_step = 2 }\n",
			"stack.hcl:19:38", "Invalid single-argument block definition", "use the multi-line block syntax"},
		{"duplicate scale_up", "size = 2", bounds + validCheck + "    scale_up { max_step = 1 }\n    scale_up { max_step = 2 }\n",
			"stack.hcl:20:5", "Duplicate scale_up block", "An autoscale has at most one scale_up block; the first is at stack.hcl:19:5"},
		{"unknown attribute", "size = 2", bounds + "    cooldwn = \"1s\"\n" + validCheck,
			"stack.hcl:14:5", "Unsupported argument", `Did you mean "cooldown"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rendered, errs := loadString(autoscaleGroup(tt.alloc, tt.body))
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1:\n%s", len(errs), rendered)
			}
			want := tt.pos + " " + tt.summary + ": "
			if !strings.HasPrefix(errs[0], want) || !strings.Contains(errs[0], tt.want) {
				t.Errorf("error:\n  %s\nwant it to start %q and contain %q", errs[0], want, tt.want)
			}
		})
	}
}

func TestAutoscaleDuplicateBlock(t *testing.T) {
	src := autoscaleGroup("size = 2", bounds+validCheck)
	src = strings.Replace(src, "  flavor { provider = sim }\n", "  flavor { provider = sim }\n  autoscale {\n"+bounds+validCheck+"  }\n", 1)
	_, rendered, errs := loadString(src)
	if len(errs) != 1 || !strings.HasPrefix(errs[0], "stack.hcl:20:3 Duplicate autoscale block: A group has at most one autoscale block; the first is at stack.hcl:11:3") {
		t.Fatalf("errors %q\n%s", errs, rendered)
	}
}

// TestAutoscaleDecodes: the attributes land in the model, unset ones take
// DefaultAutoscale's values, and a group that leaves size out starts at min.
func TestAutoscaleDecodes(t *testing.T) {
	t.Run("defaults and no size", func(t *testing.T) {
		st := mustLoadString(t, autoscaleGroup("", bounds+validCheck))
		g := st.Group("web")
		want := config.DefaultAutoscale()
		want.Min, want.Max, want.StartSize = 2, 12, 2
		want.Checks = []config.Check{{Name: "rps", Source: "prom", Query: `sum(rate(web_requests_total{infrakit_group="web"}[30s]))`, TargetPerInstance: 50}}
		clearSource(st)
		if g.Size == nil || *g.Size != 2 {
			t.Errorf("size = %v, want the start size 2 (min)", g.Size)
		}
		assertSameJSON(t, g.Autoscale, &want)
	})
	t.Run("every attribute", func(t *testing.T) {
		body := bounds + `    evaluation_interval = "15s"
    cooldown            = "0s"
` + validCheck + strings.Replace(validCheck, `"rps"`, `"p99"`, 1) + `    scale_down {
      stabilization = "0s"
      max_step      = 2
    }
    scale_up {
      stabilization = "1m"
      max_step      = 4
    }
`
		st := mustLoadString(t, autoscaleGroup("size = 12", body))
		a := st.Group("web").Autoscale
		if *st.Group("web").Size != 12 || a.EvaluationInterval != config.Duration(15*time.Second) || a.Cooldown != 0 ||
			len(a.Checks) != 2 || a.Checks[1].Name != "p99" ||
			a.ScaleDown != (config.ScalePolicy{MaxStep: 2}) || a.ScaleUp != (config.ScalePolicy{Stabilization: config.Duration(time.Minute), MaxStep: 4}) {
			b, _ := json.Marshal(a)
			t.Errorf("autoscale = %s", b)
		}
		if r := a.Checks[0].SourceRange; pos("", &r) != "stack.hcl:17:29" {
			t.Errorf("source range %s", pos("", &r))
		}
	})
	t.Run("query from variables", func(t *testing.T) {
		src := autoscaleGroup("size = var.start", bounds+rpsCheck("prom", "var.target")) + `
variable "start" { default = 3 }
variable "target" { default = 0.5 }
locals { metric = "web_requests_total" }
`
		src = strings.Replace(src, `"sum(rate(web_requests_total{infrakit_group=\"web\"}[30s]))"`, `"sum(rate(${local.metric}{infrakit_group=\"web\"}[30s]))"`, 1)
		st := mustLoadString(t, src)
		c := st.Group("web").Autoscale.Checks[0]
		if c.Query != `sum(rate(web_requests_total{infrakit_group="web"}[30s]))` || c.TargetPerInstance != 0.5 || *st.Group("web").Size != 3 {
			t.Errorf("check = %+v, size %d", c, *st.Group("web").Size)
		}
	})
	t.Run("testdata", func(t *testing.T) {
		st, diags := config.Load("testdata/autoscale")
		if len(diags) > 0 {
			t.Fatal(render(st, diags))
		}
		web, worker := st.Group("web"), st.Group("worker")
		if *web.Size != 2 || web.Autoscale.Max != 12 || web.Autoscale.ScaleDown.Stabilization != config.Duration(2*time.Minute) {
			t.Errorf("web: size %d, %+v", *web.Size, web.Autoscale)
		}
		if *worker.Size != 1 || len(worker.Autoscale.Checks) != 2 || worker.Autoscale.Checks[1].TargetPerInstance != 0.25 {
			t.Errorf("worker: size %d, %+v", *worker.Size, worker.Autoscale)
		}
	})
}

// TestAutoscaleKeepsConfigHash: autoscaling is sizing, so adding or
// changing an autoscale block never makes a member out of date.
func TestAutoscaleKeepsConfigHash(t *testing.T) {
	plain := mustLoadString(t, strings.Replace(autoscaleGroup("size = 2", ""), "  autoscale {\n  }\n", "", 1))
	scaled := mustLoadString(t, autoscaleGroup("size = 2", bounds+validCheck))
	if plain.Group("web").Autoscale != nil || scaled.Group("web").Autoscale == nil {
		t.Fatal("the stacks are not what the test means")
	}
	if a, b := plain.Group("web").ConfigHash(), scaled.Group("web").ConfigHash(); a != b {
		t.Errorf("hash %s without autoscale, %s with", a, b)
	}
}

// TestAutoscaleRoundTrips: the testdata stack survives state (JSON) and
// convert (MarshalHCL) unchanged, and what is stored passes CheckStored.
func TestAutoscaleRoundTrips(t *testing.T) {
	st, diags := config.Load("testdata/autoscale")
	if len(diags) > 0 {
		t.Fatal(render(st, diags))
	}
	src, err := st.MarshalHCL()
	if err != nil {
		t.Fatal(err)
	}
	again := mustLoadString(t, string(src))
	clearSource(st)
	back := jsonRoundTrip(t, st)
	assertSameModel(t, back, st)
	assertSameModel(t, clearSource(again), st)
	if err := config.CheckStored(back); err != nil {
		t.Fatal(err)
	}
	// Defaults are left out; what differs from them is written.
	for _, want := range []string{"scale_down {\n      stabilization = \"2m\"\n      max_step      = 2\n    }", "target_per_instance = 0.25", "source              = prometheus"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("MarshalHCL lacks %q:\n%s", want, src)
		}
	}
	if strings.Contains(string(src), "evaluation_interval") {
		t.Errorf("MarshalHCL writes the default evaluation_interval:\n%s", src)
	}
}

// TestAutoscaleGraph: a group depends on the providers its checks query.
func TestAutoscaleGraph(t *testing.T) {
	st, diags := config.Load("testdata/autoscale")
	if len(diags) > 0 {
		t.Fatal(render(st, diags))
	}
	g := st.Graph()
	var deps []string
	for _, n := range g.Dependencies(config.Node{Kind: config.NodeGroup, Name: "worker"}) {
		deps = append(deps, n.String())
	}
	if strings.Join(deps, " ") != "provider.simulator provider.vanilla provider.prometheus" {
		t.Errorf("worker depends on %v", deps)
	}
	if got := st.Group("worker").Autoscale.Sources(); len(got) != 1 || got[0] != "prometheus" {
		t.Errorf("Sources = %v", got)
	}
}

// TestAutoscaleValidateWithProviders: a check's source must serve metrics.
func TestAutoscaleValidateWithProviders(t *testing.T) {
	meta := map[string]provider.Metadata{
		"sim": {Name: "sim", Objects: []provider.Object{
			{Kind: provider.KindInstance, Type: "vm", Schema: provider.Schema{Open: true}},
			{Kind: provider.KindFlavor, Type: "sim", Schema: provider.Schema{Open: true}},
		}},
		"prom": {Name: "prom", Objects: []provider.Object{{Kind: provider.KindMetrics, Type: "promql"}}},
	}
	ctx := context.WithValue(context.Background(), ctxKey{}, true)
	for _, tc := range []struct {
		name, source string
		want         []string
	}{
		{"metrics provider", "prom", nil},
		{"not a metrics provider", "sim", []string{`stack.hcl:15:29 Not a metrics provider: Provider "sim" serves no metrics, so check "rps" cannot query it`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := mustLoadString(t, autoscaleGroup("size = 2", bounds+rpsCheck(tc.source, "50")))
			diags := config.ValidateWithProviders(ctx, st, &fakeProviders{meta: meta})
			if len(diags) != len(tc.want) {
				t.Fatalf("diagnostics:\n%s", render(st, diags))
			}
			for i, d := range diags {
				if got := pos("", d.Subject) + " " + d.Summary + ": " + d.Detail; !strings.HasPrefix(got, tc.want[i]) {
					t.Errorf("got %q\nwant %q", got, tc.want[i])
				}
			}
		})
	}
}

// TestCheckStoredAutoscale: a stored autoscale block is held to the rules
// of the files.
func TestCheckStoredAutoscale(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(g *config.Group)
		want string // "" passes
	}{
		{"as loaded", func(*config.Group) {}, ""},
		{"size at max", func(g *config.Group) { *g.Size = 12 }, ""},
		{"size above max", func(g *config.Group) { *g.Size = 13 }, `group "web" autoscales between min = 2 and max = 12, so its size must be within them; got 13`},
		{"min above max", func(g *config.Group) { g.Autoscale.Min = 20 }, `group "web" autoscale: min (20) is more than max (12)`},
		{"max zero", func(g *config.Group) { g.Autoscale.Min, g.Autoscale.Max, *g.Size = 0, 0, 0 }, "max must be at least 1; got 0"},
		{"negative min", func(g *config.Group) { g.Autoscale.Min = -1 }, "min must be at least 0; got -1"},
		{"max over the limit", func(g *config.Group) { g.Autoscale.Max = 1e9 }, "1000000000 instances is more than the stack allows"},
		{"pets", func(g *config.Group) { g.Size, g.LogicalIDs = nil, []string{"a"} }, "only cattle autoscale"},
		{"no check", func(g *config.Group) { g.Autoscale.Checks = nil }, `group "web" autoscale: has no check`},
		{"zero target", func(g *config.Group) { g.Autoscale.Checks[0].TargetPerInstance = 0 }, `check "rps": target_per_instance must be a finite number greater than 0; got 0`},
		{"empty query", func(g *config.Group) { g.Autoscale.Checks[0].Query = "" }, "the query must not be empty"},
		{"huge query", func(g *config.Group) {
			g.Autoscale.Checks[0].Query = strings.Repeat("x", config.MaxPropertyValueSize+1)
		}, "the query is 262145 bytes"},
		{"no source", func(g *config.Group) { g.Autoscale.Checks[0].Source = "" }, "names no source"},
		{"bad check name", func(g *config.Group) { g.Autoscale.Checks[0].Name = "a/b" }, `"a/b" cannot be referenced`},
		{"duplicate check", func(g *config.Group) { g.Autoscale.Checks = append(g.Autoscale.Checks, g.Autoscale.Checks[0]) }, "declared twice"},
		{"zero interval", func(g *config.Group) { g.Autoscale.EvaluationInterval = 0 }, "evaluation_interval must be at least 1s; got 0s"},
		{"negative cooldown", func(g *config.Group) { g.Autoscale.Cooldown = -1 }, "cooldown must be at least 0s"},
		{"negative max_step", func(g *config.Group) { g.Autoscale.ScaleUp.MaxStep = -1 }, `group "web" autoscale scale_up: max_step must be at least 0; got -1`},
		{"negative stabilization", func(g *config.Group) { g.Autoscale.ScaleDown.Stabilization = -1 }, "scale_down: stabilization must be at least 0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := jsonRoundTrip(t, mustLoadString(t, autoscaleGroup("size = 2", bounds+validCheck)))
			tc.edit(st.Group("web"))
			err := config.CheckStored(st)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckStored = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func mustLoadString(t *testing.T, src string) *config.Stack {
	t.Helper()
	st, rendered, errs := loadString(src)
	if len(errs) > 0 || strings.Contains(rendered, "Warning") {
		t.Fatalf("%s\n%s", rendered, src)
	}
	return st
}

func assertSameJSON(t *testing.T, got, want any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Errorf("got  %s\nwant %s", g, w)
	}
}
