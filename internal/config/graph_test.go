package config_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/internal/config"
)

func node(kind config.NodeKind, name string) config.Node { return config.Node{Kind: kind, Name: name} }

func TestStackGraph(t *testing.T) {
	g := e2eModel().Graph()

	order, err := g.TopologicalOrder()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"provider.simulator", "provider.simulator.nfs-auth", "provider.vanilla",
		"group.miners", "group.cattle",
		"loadbalancer.lb1", "loadbalancer.lb2", "loadbalancer.lb3",
		"ingress.test.com", "enrollment.nfs",
	}
	var got []string
	for _, n := range order {
		got = append(got, n.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("order = %v\nwant    %v", got, want)
	}

	deps := map[config.Node][]config.Node{
		node(config.NodeGroup, "miners"): {node(config.NodeProvider, "simulator"), node(config.NodeProvider, "vanilla")},
		node(config.NodeIngress, "test.com"): {
			node(config.NodeLoadBalancer, "lb1"), node(config.NodeGroup, "miners"),
			node(config.NodeLoadBalancer, "lb2"), node(config.NodeLoadBalancer, "lb3"), node(config.NodeGroup, "cattle"),
		},
		node(config.NodeEnrollment, "nfs"):   {node(config.NodeGroup, "cattle"), node(config.NodeProvider, "simulator.nfs-auth")},
		node(config.NodeProvider, "vanilla"): nil,
	}
	for n, want := range deps {
		if got := g.Dependencies(n); !slices.Equal(got, want) {
			t.Errorf("Dependencies(%s) = %v, want %v", n, got, want)
		}
	}
	if got := g.Dependents(node(config.NodeGroup, "cattle")); !slices.Equal(got, []config.Node{
		node(config.NodeIngress, "test.com"), node(config.NodeEnrollment, "nfs"),
	}) {
		t.Errorf("Dependents(group.cattle) = %v", got)
	}
}

func TestGraphCycle(t *testing.T) {
	a, b, c, d := node(config.NodeGroup, "a"), node(config.NodeGroup, "b"), node(config.NodeGroup, "c"), node(config.NodeGroup, "d")
	g := config.NewGraph()
	g.AddNode(d)
	g.AddEdge(a, b)
	g.AddEdge(b, c)
	g.AddEdge(c, a)
	g.AddEdge(c, a) // a repeated edge is one edge
	if got := g.Dependencies(c); len(got) != 1 {
		t.Errorf("Dependencies(c) = %v", got)
	}
	_, err := g.TopologicalOrder()
	var cycle *config.CycleError
	if !errors.As(err, &cycle) {
		t.Fatalf("err = %v", err)
	}
	if err.Error() != "dependency cycle: group.a -> group.b -> group.c -> group.a" {
		t.Errorf("err = %v", err)
	}
}

// TestGraphProperties: on a random DAG every node comes after its
// dependencies; adding a back edge makes TopologicalOrder report a cycle
// whose every step is an edge of the graph.
func TestGraphProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(t, "n")
		nodes := make([]config.Node, n)
		for i := range nodes {
			nodes[i] = node(config.NodeGroup, fmt.Sprint(i))
		}
		g := config.NewGraph()
		// Shuffle insertion so the order is not trivially the index order.
		for _, i := range rapid.Permutation(rangeInts(n)).Draw(t, "insert") {
			g.AddNode(nodes[i])
		}
		// Edges only from a higher index to a lower one: acyclic.
		edges := rapid.SliceOf(rapid.Custom(func(t *rapid.T) [2]int {
			from := rapid.IntRange(0, n-1).Draw(t, "from")
			return [2]int{from, rapid.IntRange(0, from).Draw(t, "to")}
		})).Draw(t, "edges")
		for _, e := range edges {
			if e[0] != e[1] {
				g.AddEdge(nodes[e[0]], nodes[e[1]])
			}
		}
		order, err := g.TopologicalOrder()
		if err != nil {
			t.Fatalf("acyclic graph: %v", err)
		}
		if len(order) != n {
			t.Fatalf("order has %d nodes, want %d", len(order), n)
		}
		at := map[config.Node]int{}
		for i, nd := range order {
			at[nd] = i
		}
		for _, nd := range nodes {
			for _, dep := range g.Dependencies(nd) {
				if at[dep] >= at[nd] {
					t.Fatalf("%s comes before its dependency %s in %v", nd, dep, order)
				}
			}
		}

		// A back edge along an existing path (or a self loop) closes a cycle.
		if len(edges) == 0 {
			return
		}
		e := rapid.SampledFrom(edges).Draw(t, "back")
		g.AddEdge(nodes[e[1]], nodes[e[0]])
		_, err = g.TopologicalOrder()
		var cycle *config.CycleError
		if !errors.As(err, &cycle) {
			t.Fatalf("no cycle reported after adding %d -> %d: %v", e[1], e[0], err)
		}
		cyc := cycle.Cycle
		if len(cyc) < 2 || cyc[0] != cyc[len(cyc)-1] {
			t.Fatalf("cycle %v does not close", cyc)
		}
		for i := 0; i+1 < len(cyc); i++ {
			if !slices.Contains(g.Dependencies(cyc[i]), cyc[i+1]) {
				t.Fatalf("cycle step %s -> %s is not an edge", cyc[i], cyc[i+1])
			}
		}
	})
}

func rangeInts(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
