package config_test

import (
	"fmt"
	"slices"
	"time"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

// Generators of valid stack models, for properties that must hold for any
// stack a user can write.

// keywords cannot be provider names (a reference `null` is the literal).
var notProviderNames = []string{"group", "loadbalancer", "ingress", "enrollment", "stack", "provider", "member", "null", "true", "false"}

func genIdent() *rapid.Generator[string] {
	return rapid.StringMatching(`[a-z][a-z0-9_-]{0,6}`)
}

// genText is any string, with the characters HCL and JSON must escape.
func genText() *rapid.Generator[string] {
	return rapid.StringOf(rapid.SampledFrom([]rune("ab z09\"\\\n\t$%{}<>&é日.")))
}

func genDuration(min time.Duration) *rapid.Generator[config.Duration] {
	var ds []config.Duration
	for _, d := range []time.Duration{0, time.Second, 3 * time.Second, 30 * time.Second, 90 * time.Second, 5 * time.Minute, 2 * time.Hour, 150 * time.Millisecond} {
		if d >= min {
			ds = append(ds, config.Duration(d))
		}
	}
	return rapid.SampledFrom(ds)
}

// genValue is a property value: anything HCL literals can write.
func genValue(depth int) *rapid.Generator[cty.Value] {
	return rapid.Custom(func(t *rapid.T) cty.Value {
		kinds := []string{"string", "int", "decimal", "bool", "null"}
		if depth > 0 {
			kinds = append(kinds, "tuple", "object")
		}
		switch rapid.SampledFrom(kinds).Draw(t, "kind") {
		case "string":
			return cty.StringVal(genText().Draw(t, "s"))
		case "int":
			return cty.NumberIntVal(rapid.Int64Range(-1e12, 1e12).Draw(t, "i"))
		case "decimal":
			return cty.MustParseNumberVal(rapid.SampledFrom([]string{"0.5", "1.25", "-3.75", "1e-3", "12345.678"}).Draw(t, "f"))
		case "bool":
			return cty.BoolVal(rapid.Bool().Draw(t, "b"))
		case "null":
			return cty.NullVal(cty.DynamicPseudoType)
		case "tuple":
			elems := rapid.SliceOfN(genValue(depth-1), 0, 3).Draw(t, "elems")
			return cty.TupleVal(elems)
		default:
			return genObject(depth-1).Draw(t, "obj")
		}
	})
}

// genObject is a properties object; keys may need quoting.
func genObject(depth int) *rapid.Generator[cty.Value] {
	return rapid.Custom(func(t *rapid.T) cty.Value {
		keys := rapid.SliceOfNDistinct(rapid.OneOf(genIdent(), rapid.SampledFrom([]string{"a b", "x.y", "null", "9lives", ""})), 0, 3, rapid.ID[string]).Draw(t, "keys")
		attrs := map[string]cty.Value{}
		for _, k := range keys {
			attrs[k] = genValue(depth).Draw(t, "v")
		}
		return cty.ObjectVal(attrs)
	})
}

func genProperties() *rapid.Generator[[]byte] {
	return rapid.Custom(func(t *rapid.T) []byte {
		v := genObject(2).Draw(t, "properties")
		b, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

func genStack() *rapid.Generator[*config.Stack] {
	return rapid.Custom(func(t *rapid.T) *config.Stack {
		st := &config.Stack{Name: rapid.StringMatching(`[a-z_][a-z0-9_-]{0,8}`).Draw(t, "stack")}
		if rapid.Bool().Draw(t, "limits") {
			st.Limits = &config.Limits{MaxGroupSize: rapid.IntRange(100, config.MaxMaxGroupSize).Draw(t, "max_group_size")}
		}

		// Providers: distinct keys, some aliased.
		names := rapid.SliceOfNDistinct(genIdent().Filter(func(s string) bool { return !slices.Contains(notProviderNames, s) }), 1, 3, rapid.ID[string]).Draw(t, "providers")
		var keys []string
		for _, name := range names {
			aliases := rapid.SliceOfNDistinct(rapid.OneOf(rapid.Just(""), genIdent()), 1, 2, rapid.ID[string]).Draw(t, "aliases")
			for _, alias := range aliases {
				p := &config.Provider{Name: name, Alias: alias}
				if rapid.Bool().Draw(t, "config") {
					p.Config = genProperties().Filter(func(b []byte) bool { return string(b) != "{}" }).Filter(validAttrNames).Draw(t, "config")
				}
				st.Providers = append(st.Providers, p)
				keys = append(keys, p.Key())
			}
		}
		provider := rapid.SampledFrom(keys)

		for _, name := range rapid.SliceOfNDistinct(genIdent(), 0, 3, rapid.ID[string]).Draw(t, "groups") {
			g := &config.Group{Name: name, Update: config.DefaultUpdatePolicy(), Health: config.DefaultHealthPolicy(), DrainDelay: config.DefaultDrainDelay}
			if rapid.Bool().Draw(t, "pets") {
				g.LogicalIDs = rapid.SliceOfNDistinct(genText().Filter(func(s string) bool { return s != "" }), 1, 3, rapid.ID[string]).Draw(t, "ids")
			} else {
				g.Size = intPtr(rapid.IntRange(0, 100).Draw(t, "size"))
			}
			if tags := rapid.MapOfN(rapid.OneOf(genIdent(), rapid.Just("example.com/owner")), genText(), 0, 3).Draw(t, "tags"); len(tags) > 0 {
				g.Tags = tags
			}
			g.Instance = config.Plugin{Provider: provider.Draw(t, "p"), Type: genIdent().Draw(t, "type"), Properties: genProperties().Draw(t, "props")}
			for range rapid.IntRange(1, 2).Draw(t, "flavors") {
				g.Flavors = append(g.Flavors, config.Plugin{
					Provider:   provider.Draw(t, "p"),
					Type:       rapid.OneOf(rapid.Just(""), genIdent()).Draw(t, "type"),
					Properties: genProperties().Draw(t, "props"),
				})
			}
			if rapid.Bool().Draw(t, "update") {
				g.Update = config.UpdatePolicy{
					MaxParallel:    rapid.IntRange(1, 10).Draw(t, "mp"),
					MaxUnavailable: rapid.IntRange(0, 10).Draw(t, "mu"),
					HealthTimeout:  genDuration(time.Second).Draw(t, "ht"),
				}
			}
			if rapid.Bool().Draw(t, "health") {
				g.Health = config.HealthPolicy{
					Grace:                  genDuration(0).Draw(t, "grace"),
					ReplaceUnhealthy:       rapid.Bool().Draw(t, "ru"),
					MaxReplacementsPerHour: rapid.IntRange(0, 10).Draw(t, "mr"),
					// 0 is the default (no attribute); a file says 1 or more.
					BrakeMin: rapid.IntRange(0, 5).Draw(t, "bm"),
				}
			}
			if g.Size != nil && rapid.Bool().Draw(t, "autoscale") {
				g.Autoscale = genAutoscale(provider).Draw(t, "autoscale")
				g.Size = intPtr(rapid.IntRange(g.Autoscale.Min, g.Autoscale.Max).Draw(t, "start"))
				g.Autoscale.StartSize = *g.Size
			}
			st.Groups = append(st.Groups, g)
		}

		for _, name := range rapid.SliceOfNDistinct(genIdent(), 0, 3, rapid.ID[string]).Draw(t, "lbs") {
			st.LoadBalancers = append(st.LoadBalancers, &config.LoadBalancer{Name: name, Provider: provider.Draw(t, "p")})
		}

		var groupNames, lbNames []string
		for _, g := range st.Groups {
			groupNames = append(groupNames, g.Name)
		}
		for _, lb := range st.LoadBalancers {
			lbNames = append(lbNames, lb.Name)
		}
		if len(groupNames) > 0 && len(lbNames) > 0 {
			published := map[string]bool{}
			owner := map[string]string{} // an ingress owns its load balancers
			for _, name := range rapid.SliceOfNDistinct(rapid.StringMatching(`[a-z][a-z0-9.]{0,8}`), 0, 2, rapid.ID[string]).Draw(t, "ingresses") {
				var mine []string
				for _, lb := range lbNames {
					if o, taken := owner[lb]; !taken || o == name {
						mine = append(mine, lb)
					}
				}
				if len(mine) == 0 {
					break
				}
				in := &config.Ingress{Name: name, SyncInterval: genDuration(time.Second).Draw(t, "sync")}
				for range rapid.IntRange(1, 2).Draw(t, "rules") {
					r := config.Rule{
						LoadBalancer: rapid.SampledFrom(mine).Draw(t, "lb"),
						Groups:       rapid.SliceOfNDistinct(rapid.SampledFrom(groupNames), 1, len(groupNames), rapid.ID[string]).Draw(t, "groups"),
					}
					for range rapid.IntRange(1, 2).Draw(t, "routes") {
						port := rapid.IntRange(1, 65535).Filter(func(p int) bool { return !published[fmt.Sprint(r.LoadBalancer, p)] }).Draw(t, "lb_port")
						published[fmt.Sprint(r.LoadBalancer, port)] = true
						protocols := []loadbalancer.Protocol{"tcp", "udp", "http", "https", "ssl"}
						rt := config.Route{
							LBPort:     port,
							LBProtocol: rapid.SampledFrom(protocols).Draw(t, "lb_protocol"),
							Port:       rapid.IntRange(1, 65535).Draw(t, "port"),
							Protocol:   rapid.SampledFrom(protocols).Draw(t, "protocol"),
						}
						if rt.LBProtocol == "https" || rt.LBProtocol == "ssl" {
							rt.Certificate = rapid.OneOf(rapid.Just(""), genText()).Draw(t, "cert")
						}
						r.Routes = append(r.Routes, rt)
					}
					owner[r.LoadBalancer] = name
					in.Rules = append(in.Rules, r)
				}
				st.Ingresses = append(st.Ingresses, in)
			}
		}

		if len(groupNames) > 0 {
			for _, name := range rapid.SliceOfNDistinct(genIdent(), 0, 2, rapid.ID[string]).Draw(t, "enrollments") {
				st.Enrollments = append(st.Enrollments, &config.Enrollment{
					Name:   name,
					Source: rapid.SampledFrom(groupNames).Draw(t, "source"),
					Target: config.EnrollmentTarget{
						Provider: provider.Draw(t, "p"),
						Type:     genIdent().Draw(t, "type"),
						// Source text is kept as written, so these are written
						// the way fmt leaves them.
						Properties: rapid.SampledFrom([]string{
							"",
							"{ host = member.id, iops = 10 }",
							"{ host = member.address, volume = \"vol-${member.logical_id}\" }",
							"member.properties",
							"{ tags = member.tags, opts = [\"rw\", \"sync\"] }",
						}).Draw(t, "properties"),
					},
					SyncInterval:  genDuration(time.Second).Draw(t, "sync"),
					DestroyOnFree: rapid.Bool().Draw(t, "destroy_on_free"),
				})
			}
		}
		return st
	})
}

// validAttrNames keeps provider configs whose keys can be HCL attribute
// names other than alias.
func validAttrNames(b []byte) bool {
	ty, err := ctyjson.ImpliedType(b)
	if err != nil {
		return false
	}
	for name := range ty.AttributeTypes() {
		if !validIdent(name) || name == "alias" {
			return false
		}
	}
	return true
}

func validIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		letter := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !letter && (i == 0 || !(r == '-' || (r >= '0' && r <= '9'))) {
			return false
		}
	}
	return true
}

// genAutoscale is an autoscale block whose checks query providers drawn
// from provider.
func genAutoscale(provider *rapid.Generator[string]) *rapid.Generator[*config.Autoscale] {
	return rapid.Custom(func(t *rapid.T) *config.Autoscale {
		a := config.DefaultAutoscale()
		a.Min = rapid.IntRange(0, 20).Draw(t, "min")
		a.Max = rapid.IntRange(max(a.Min, 1), 100).Draw(t, "max")
		if rapid.Bool().Draw(t, "intervals") {
			a.EvaluationInterval = genDuration(time.Second).Draw(t, "evaluation_interval")
			a.Cooldown = genDuration(0).Draw(t, "cooldown")
		}
		for _, name := range rapid.SliceOfNDistinct(genIdent(), 1, 3, rapid.ID[string]).Draw(t, "checks") {
			a.Checks = append(a.Checks, config.Check{
				Name:              name,
				Source:            provider.Draw(t, "source"),
				Query:             genText().Filter(func(s string) bool { return s != "" }).Draw(t, "query"),
				TargetPerInstance: rapid.SampledFrom([]float64{0.25, 1, 12.5, 50, 1e6, 1e-9}).Draw(t, "target"),
			})
		}
		policy := func(name string, p *config.ScalePolicy) {
			if rapid.Bool().Draw(t, name) {
				p.Stabilization = genDuration(0).Draw(t, name+" stabilization")
				p.MaxStep = rapid.IntRange(0, 10).Draw(t, name+" max_step")
			}
		}
		policy("scale_down", &a.ScaleDown)
		policy("scale_up", &a.ScaleUp)
		return &a
	})
}
