package config

import (
	"slices"
	"strings"
)

// NodeKind is the kind of a stack object in the dependency graph.
type NodeKind string

// Node kinds, named after their blocks.
const (
	NodeProvider     NodeKind = blockProvider
	NodeGroup        NodeKind = blockGroup
	NodeLoadBalancer NodeKind = blockLoadBalancer
	NodeIngress      NodeKind = blockIngress
	NodeEnrollment   NodeKind = blockEnrollment
)

// Node is one stack object. Name is the provider key for providers.
type Node struct {
	Kind NodeKind
	Name string
}

// String is "group.cattle", "provider.simulator.nfs-auth".
func (n Node) String() string { return string(n.Kind) + "." + n.Name }

// Graph is the dependency graph of a stack: an edge from A to B means A
// refers to B, so B must exist before A is created and outlive it.
type Graph struct {
	nodes []Node
	index map[Node]bool
	deps  map[Node][]Node
}

// NewGraph returns an empty graph.
func NewGraph() *Graph {
	return &Graph{index: map[Node]bool{}, deps: map[Node][]Node{}}
}

// AddNode adds n if it is not there yet. Nodes keep the order they are added in.
func (g *Graph) AddNode(n Node) {
	if !g.index[n] {
		g.index[n] = true
		g.nodes = append(g.nodes, n)
	}
}

// AddEdge records that from depends on to, adding both nodes as needed.
func (g *Graph) AddEdge(from, to Node) {
	g.AddNode(from)
	g.AddNode(to)
	for _, d := range g.deps[from] {
		if d == to {
			return
		}
	}
	g.deps[from] = append(g.deps[from], to)
}

// Nodes lists the nodes in the order they were added.
func (g *Graph) Nodes() []Node { return append([]Node(nil), g.nodes...) }

// Dependencies lists what n refers to.
func (g *Graph) Dependencies(n Node) []Node { return append([]Node(nil), g.deps[n]...) }

// Dependents lists what refers to n, in node order.
func (g *Graph) Dependents(n Node) []Node {
	var out []Node
	for _, m := range g.nodes {
		for _, d := range g.deps[m] {
			if d == n {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// CycleError is returned by TopologicalOrder when nodes depend on each other.
type CycleError struct {
	// Cycle starts and ends with the same node.
	Cycle []Node
}

func (e *CycleError) Error() string {
	parts := make([]string, len(e.Cycle))
	for i, n := range e.Cycle {
		parts[i] = n.String()
	}
	return "dependency cycle: " + strings.Join(parts, " -> ")
}

// TopologicalOrder lists every node after all of its dependencies: the order
// to create in (reverse it to destroy). It is deterministic: among nodes
// free to go, the one added first goes first.
func (g *Graph) TopologicalOrder() ([]Node, error) {
	const (
		unvisited = iota
		visiting
		done
	)
	state := make(map[Node]int, len(g.nodes))
	order := make([]Node, 0, len(g.nodes))
	var stack []Node
	var visit func(n Node) error
	visit = func(n Node) error {
		switch state[n] {
		case done:
			return nil
		case visiting:
			// n is on the stack: the cycle is the stack from n on, back to n.
			i := slices.Index(stack, n)
			cycle := append(append([]Node(nil), stack[i:]...), n)
			return &CycleError{Cycle: cycle}
		}
		state[n] = visiting
		stack = append(stack, n)
		for _, d := range g.deps[n] {
			if err := visit(d); err != nil {
				return err
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		order = append(order, n)
		return nil
	}
	for _, n := range g.nodes {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// Graph builds the stack's dependency graph: groups depend on the providers
// of their instance and flavors and those their autoscale checks query, load balancers on their provider, ingresses
// on their load balancers and groups, enrollments on their source group and
// target provider.
func (s *Stack) Graph() *Graph {
	g := NewGraph()
	provider := func(key string) Node { return Node{Kind: NodeProvider, Name: key} }
	for _, p := range s.Providers {
		g.AddNode(provider(p.Key()))
	}
	for _, grp := range s.Groups {
		n := Node{Kind: NodeGroup, Name: grp.Name}
		g.AddNode(n)
		if grp.Instance.Provider != "" {
			g.AddEdge(n, provider(grp.Instance.Provider))
		}
		for _, f := range grp.Flavors {
			if f.Provider != "" {
				g.AddEdge(n, provider(f.Provider))
			}
		}
		for _, key := range grp.Autoscale.Sources() {
			g.AddEdge(n, provider(key))
		}
	}
	for _, lb := range s.LoadBalancers {
		n := Node{Kind: NodeLoadBalancer, Name: lb.Name}
		g.AddNode(n)
		if lb.Provider != "" {
			g.AddEdge(n, provider(lb.Provider))
		}
	}
	for _, in := range s.Ingresses {
		n := Node{Kind: NodeIngress, Name: in.Name}
		g.AddNode(n)
		for _, r := range in.Rules {
			if r.LoadBalancer != "" {
				g.AddEdge(n, Node{Kind: NodeLoadBalancer, Name: r.LoadBalancer})
			}
			for _, grp := range r.Groups {
				g.AddEdge(n, Node{Kind: NodeGroup, Name: grp})
			}
		}
	}
	for _, e := range s.Enrollments {
		n := Node{Kind: NodeEnrollment, Name: e.Name}
		g.AddNode(n)
		if e.Source != "" {
			g.AddEdge(n, Node{Kind: NodeGroup, Name: e.Source})
		}
		if e.Target.Provider != "" {
			g.AddEdge(n, provider(e.Target.Provider))
		}
	}
	return g
}
