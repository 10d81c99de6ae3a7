package config

import (
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/infrakit/infrakit/internal/config/legacy"
)

// Specifications in the old formats have no provider or loadbalancer
// blocks: "Plugin": "simulator/compute" names provider simulator and
// "L4Plugin": "simulator/lb1" load balancer lb1 of it. The loader adds
// what they name and the stack does not declare, as if declared with
// nothing but that (provider "simulator" {}, loadbalancer "lb1" {
// provider = simulator }), at the place the specification names it.

// declareImpliedProviders declares each provider the specifications name
// that no provider block declares, in the order of their keys (which does
// not depend on how the files are named).
func (l *loader) declareImpliedProviders() {
	var implied []legacy.Provider
	for _, spec := range l.specs {
		implied = append(implied, spec.Providers...)
	}
	slices.SortStableFunc(implied, func(a, b legacy.Provider) int { return strings.Compare(a.Key(), b.Key()) })
	for _, ip := range implied {
		p := &Provider{Name: ip.Name, Alias: ip.Alias, DeclRange: ip.Range}
		if _, declared := l.providers[p.Key()]; declared {
			continue
		}
		if _, reserved := reservedRoots[p.Name]; reserved {
			continue // each reference to it is reported as not naming a provider
		}
		l.providers[p.Key()] = p
		l.providerKeys = append(l.providerKeys, p.Key())
		l.st.Providers = append(l.st.Providers, p)
	}
}

// declareImpliedLoadBalancers declares each load balancer the
// specifications name that no loadbalancer block declares, and returns them.
func (l *loader) declareImpliedLoadBalancers() []*LoadBalancer {
	var out []*LoadBalancer
	for _, spec := range l.specs {
		for _, ilb := range spec.LoadBalancers {
			if _, declared := l.lbs[ilb.Name]; declared {
				continue
			}
			l.lbs[ilb.Name] = ilb.Range
			l.lbNames = append(l.lbNames, ilb.Name)
			out = append(out, &LoadBalancer{
				Name:          ilb.Name,
				Provider:      ilb.Provider,
				DeclRange:     ilb.Range,
				ProviderRange: ilb.Range,
			})
		}
	}
	return out
}

// checkImpliedLoadBalancers reports a specification naming a load balancer
// with another provider than the one that declares it.
func (l *loader) checkImpliedLoadBalancers() {
	for _, spec := range l.specs {
		for _, ilb := range spec.LoadBalancers {
			lb := l.st.LoadBalancer(ilb.Name)
			if lb == nil || lb.Provider == "" || lb.Provider == ilb.Provider {
				continue
			}
			l.errorf(ilb.Range, "Conflicting load balancer",
				"This names load balancer %q of provider %q, but loadbalancer %q at %s is served by provider %q.",
				ilb.Name, ilb.Provider, lb.Name, rangeString(lb.DeclRange), lb.Provider)
		}
	}
}

// formatExpression is an expression's source text as `infrakit fmt` would
// write it at the top level of a file. Target properties are kept as text,
// so without it the same stack written with other spacing or indentation
// (by hand, or by MarshalHCL inside its target block) would load into a
// different model. Text that does not format as one attribute is kept.
func formatExpression(src string) string {
	const prefix = "x = "
	out, ok := strings.CutPrefix(string(hclwrite.Format([]byte(prefix+src))), prefix)
	if !ok {
		return src
	}
	return out
}

// sourceText is the HCL source of an expression: the bytes of its range,
// or, for enrollment target properties converted from a specification
// (whose range is in JSON or YAML), the HCL they were converted to.
func (l *loader) sourceText(expr hcl.Expression) string {
	if conv, ok := expr.(*legacy.PropertiesExpr); ok {
		return conv.Source
	}
	r := expr.Range()
	f := l.st.Files[r.Filename]
	if f == nil {
		return ""
	}
	return string(r.SliceBytes(f.Bytes))
}
