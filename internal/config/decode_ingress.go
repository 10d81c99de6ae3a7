package config

// The blocks of ingresses: load balancers, ingresses, their rules and routes.

import (
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/infrakit/infrakit/sdk/loadbalancer"
)

func (l *loader) decodeLoadBalancer(b *hcl.Block) *LoadBalancer {
	lb := &LoadBalancer{Name: b.Labels[0], DeclRange: b.DefRange}
	content, d := b.Body.Content(loadBalancerSchema)
	l.diags = append(l.diags, d...)
	if a := content.Attributes["provider"]; a != nil {
		lb.Provider, _ = l.providerRef(a.Expr)
		lb.ProviderRange = a.Expr.Range()
	}
	return lb
}

func (l *loader) decodeIngress(b *hcl.Block) *Ingress {
	in := &Ingress{Name: b.Labels[0], SyncInterval: DefaultSyncInterval, DeclRange: b.DefRange}
	content, d := b.Body.Content(ingressSchema)
	l.diags = append(l.diags, d...)
	if a := content.Attributes["sync_interval"]; a != nil {
		if v, ok := l.durationAttr(a, time.Second); ok {
			in.SyncInterval = v
		}
	}
	rules := content.Blocks.OfType("rule")
	if len(rules) == 0 {
		l.errorf(b.DefRange, "Missing rule block",
			"An ingress needs at least one rule block, naming a load balancer, the groups behind it and its routes.")
	}
	for _, rb := range rules {
		r := l.decodeRule(rb)
		l.claimLoadBalancer(in.Name, r, rb)
		in.Rules = append(in.Rules, r)
	}
	return in
}

// claimLoadBalancer refuses a rule naming a load balancer another ingress
// names: an ingress owns its load balancers (what is on them and is none
// of its rules' is taken off), so two would undo each other's work on
// every apply.
func (l *loader) claimLoadBalancer(ingress string, r Rule, b *hcl.Block) {
	if r.LoadBalancer == "" {
		return
	}
	at := b.DefRange
	if attrs, _ := b.Body.JustAttributes(); attrs != nil {
		if a := attrs["loadbalancer"]; a != nil {
			at = a.Expr.Range()
		}
	}
	first, named := l.lbOwner[r.LoadBalancer]
	switch {
	case !named:
		l.lbOwner[r.LoadBalancer] = lbRule{ingress: ingress, at: at}
	case first.ingress != ingress:
		l.errorf(at, "Load balancer shared by ingresses",
			"Load balancer %q is already named by ingress %q at %s. An ingress owns its load balancers: their routes and backends are exactly its rules', so two ingresses on one load balancer would undo each other's. Put the rules in one ingress, or give each ingress its own load balancer.",
			r.LoadBalancer, first.ingress, rangeString(first.at))
	}
}

func (l *loader) decodeRule(b *hcl.Block) Rule {
	r := Rule{DeclRange: b.DefRange}
	content, d := b.Body.Content(ruleSchema)
	l.diags = append(l.diags, d...)
	if a := content.Attributes["loadbalancer"]; a != nil {
		r.LoadBalancer, _ = l.objectRef(a.Expr, blockLoadBalancer, l.lbs, l.lbNames)
	}
	if a := content.Attributes["groups"]; a != nil {
		r.Groups = l.objectRefs(a, blockGroup, l.groups, l.groupNames)
	}
	routes := content.Blocks.OfType("route")
	if len(routes) == 0 {
		l.errorf(b.DefRange, "Missing route block",
			"A rule needs at least one route block setting lb_port and port, each on its own line (HCL allows only one argument in a one-line block).")
	}
	for _, rb := range routes {
		rt, ok := l.decodeRoute(rb)
		if !ok {
			continue
		}
		if r.LoadBalancer != "" {
			key := lbPort{lb: r.LoadBalancer, port: rt.LBPort}
			if first, dup := l.publishedPort[key]; dup {
				l.errorf(rt.DeclRange, "Duplicate route",
					"Port %d of load balancer %q is already published at %s.", rt.LBPort, r.LoadBalancer, rangeString(first))
				continue
			}
			l.publishedPort[key] = rt.DeclRange
		}
		r.Routes = append(r.Routes, rt)
	}
	return r
}

// protocols are the route protocols the load balancer SPI knows.
var protocols = []loadbalancer.Protocol{loadbalancer.TCP, loadbalancer.UDP, loadbalancer.HTTP, loadbalancer.HTTPS, loadbalancer.SSL}

func (l *loader) decodeRoute(b *hcl.Block) (Route, bool) {
	rt := Route{LBProtocol: loadbalancer.TCP, DeclRange: b.DefRange}
	content, d := b.Body.Content(routeSchema)
	l.diags = append(l.diags, d...)
	ok := !d.HasErrors()
	port := func(name string, dst *int) {
		if a := content.Attributes[name]; a != nil {
			n, good := l.intAttr(a, 1, 65535, true)
			*dst = n
			ok = ok && good
		}
	}
	port("lb_port", &rt.LBPort)
	port("port", &rt.Port)
	protocol := func(name string, dst *loadbalancer.Protocol) {
		a := content.Attributes[name]
		if a == nil {
			return
		}
		s, good := l.stringAttr(a, false)
		if !good {
			return
		}
		if !slices.Contains(protocols, loadbalancer.Protocol(s)) {
			names := make([]string, len(protocols))
			for i, p := range protocols {
				names[i] = string(p)
			}
			l.errorf(a.Expr.Range(), "Invalid protocol", "%s must be one of %s; got %q.", name, strings.Join(names, ", "), s)
			ok = false
			return
		}
		*dst = loadbalancer.Protocol(s)
	}
	protocol("lb_protocol", &rt.LBProtocol)
	// The backend side speaks what the load balancer side speaks unless told otherwise.
	rt.Protocol = rt.LBProtocol
	protocol("protocol", &rt.Protocol)
	if a := content.Attributes["certificate"]; a != nil {
		if s, good := l.stringAttr(a, false); good {
			rt.Certificate = s
			if s != "" && rt.LBProtocol != loadbalancer.HTTPS && rt.LBProtocol != loadbalancer.SSL {
				l.errorf(a.Expr.Range(), "Certificate without TLS",
					"A certificate is only used when lb_protocol is https or ssl; it is %s.", rt.LBProtocol)
				ok = false
			}
		}
	}
	return rt, ok
}
