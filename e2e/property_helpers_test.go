package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The model of TestPropertyPlanIsApplied: a stack as data, the edits that
// change it, its HCL, and the world read from the simulator's files.

// propStackName names every stack the property writes.
const propStackName = "prop"

// The pools the generator draws names from: at most three groups, two
// ingresses (each owning its own load balancers) and one enrollment.
var (
	propGroupNames   = []string{"g0", "g1", "g2"}
	propLBNames      = []string{"lb1", "lb2", "lb3", "lb4"}
	propIngressNames = []string{"back", "front"}
	propLBPorts      = []int{80, 443, 8080, 8443}
	propBackendPorts = []int{80, 8080, 9000}
	// "" leaves lb_protocol (tcp) or protocol (lb_protocol) to its default.
	propLBProtocols      = []string{"", "tcp", "http", "https", "ssl"}
	propBackendProtocols = []string{"", "tcp", "http"}
)

// propStack is one version of the stack.
type propStack struct {
	Groups     []*propGroup    `json:"groups"` // sorted by name
	Ingresses  []*propIngress  `json:"ingresses"`
	Enrollment *propEnrollment `json:"enrollment"`
	// ExtraLBs are loadbalancer blocks no ingress names.
	ExtraLBs []string `json:"extra_lbs"`
}

type propGroup struct {
	Name string   `json:"name"`
	Pets []string `json:"pets"` // nil: cattle of Size
	Size int      `json:"size"`
	// Note (an instance property), Tier (a vanilla flavor tag) and
	// SimFlavor (a second flavor block) are the member configuration: a
	// change of any rolls the group.
	Note      string `json:"note"`
	Tier      string `json:"tier"`
	SimFlavor bool   `json:"sim_flavor"`
	// Owner is a group tag: a change never rolls.
	Owner  string      `json:"owner"`
	Update *propUpdate `json:"update"`
}

type propUpdate struct {
	MaxParallel    int `json:"max_parallel"`
	MaxUnavailable int `json:"max_unavailable"`
}

type propIngress struct {
	Name  string     `json:"name"`
	Rules []propRule `json:"rules"`
}

type propRule struct {
	LB     string      `json:"lb"`
	Groups []string    `json:"groups"`
	Routes []propRoute `json:"routes"`
}

type propRoute struct {
	LBPort     int    `json:"lb_port"`
	LBProtocol string `json:"lb_protocol"`
	Port       int    `json:"port"`
	Protocol   string `json:"protocol"`
	Cert       string `json:"certificate"`
}

// effective is the route as a load balancer publishes it: defaults filled in.
func (r propRoute) effective() propRouteFile {
	out := propRouteFile{LBPort: r.LBPort, LBProtocol: r.LBProtocol, Port: r.Port, Protocol: r.Protocol, Certificate: r.Cert}
	if out.LBProtocol == "" {
		out.LBProtocol = "tcp"
	}
	if out.Protocol == "" {
		out.Protocol = out.LBProtocol
	}
	return out
}

type propEnrollment struct {
	Source string `json:"source"`
	// Alias targets simulator.nfs-auth, otherwise simulator (one store).
	Alias bool `json:"alias"`
	IOPS  int  `json:"iops"`
}

func (s *propStack) clone() *propStack {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	out := &propStack{}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

func (s *propStack) group(name string) *propGroup {
	for _, g := range s.Groups {
		if g.Name == name {
			return g
		}
	}
	return nil
}

func (s *propStack) groupNames() []string {
	var out []string
	for _, g := range s.Groups {
		out = append(out, g.Name)
	}
	return out
}

// ownedLBs returns the load balancers each ingress names, and all of them.
func (s *propStack) ownedLBs() (map[string]string, []string) {
	owner := map[string]string{}
	var all []string
	for _, in := range s.Ingresses {
		for _, r := range in.Rules {
			if _, ok := owner[r.LB]; !ok {
				owner[r.LB] = in.Name
				all = append(all, r.LB)
			}
		}
	}
	slices.Sort(all)
	return owner, all
}

// prune drops what refers to groups that are gone: group names from rules,
// rules with no group left, ingresses with no rule left, an enrollment whose
// source is gone.
func (s *propStack) prune() {
	var ingresses []*propIngress
	for _, in := range s.Ingresses {
		var rules []propRule
		for _, r := range in.Rules {
			r.Groups = slices.DeleteFunc(r.Groups, func(g string) bool { return s.group(g) == nil })
			if len(r.Groups) > 0 {
				rules = append(rules, r)
			}
		}
		in.Rules = rules
		if len(rules) > 0 {
			ingresses = append(ingresses, in)
		}
	}
	s.Ingresses = ingresses
	if s.Enrollment != nil && s.group(s.Enrollment.Source) == nil {
		s.Enrollment = nil
	}
	owned, _ := s.ownedLBs()
	s.ExtraLBs = slices.DeleteFunc(s.ExtraLBs, func(lb string) bool { _, ok := owned[lb]; return ok })
}

// describe is a one-line summary of the stack for the test log.
func (s *propStack) describe() string {
	var parts []string
	for _, g := range s.Groups {
		what := fmt.Sprintf("size %d", g.Size)
		if g.Pets != nil {
			what = fmt.Sprintf("pets %v", g.Pets)
		}
		parts = append(parts, fmt.Sprintf("group %s %s config %s/%s/%v", g.Name, what, g.Note, g.Tier, g.SimFlavor))
	}
	for _, in := range s.Ingresses {
		var rules []string
		for _, r := range in.Rules {
			var ports []string
			for _, rt := range r.Routes {
				e := rt.effective()
				ports = append(ports, fmt.Sprintf("%d/%s->%d/%s", e.LBPort, e.LBProtocol, e.Port, e.Protocol))
			}
			rules = append(rules, fmt.Sprintf("%s%v%v", r.LB, r.Groups, ports))
		}
		parts = append(parts, fmt.Sprintf("ingress %s %s", in.Name, strings.Join(rules, " ")))
	}
	if e := s.Enrollment; e != nil {
		parts = append(parts, fmt.Sprintf("enrollment nfs of %s (alias %v, iops %d)", e.Source, e.Alias, e.IOPS))
	}
	if len(parts) == 0 {
		return "(empty stack)"
	}
	return strings.Join(parts, "; ")
}

// hcl renders the stack. Every provider block is always there, so one
// `infrakit init` serves the whole sequence.
func (s *propStack) hcl() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stack %q {}\n\n", propStackName)
	b.WriteString("provider \"simulator\" {}\nprovider \"simulator\" { alias = \"nfs-auth\" }\nprovider \"vanilla\" {}\n")
	for _, g := range s.Groups {
		fmt.Fprintf(&b, "\ngroup %q {\n", g.Name)
		if g.Pets != nil {
			fmt.Fprintf(&b, "  logical_ids = [%s]\n", propQuote(g.Pets))
		} else {
			fmt.Fprintf(&b, "  size = %d\n", g.Size)
		}
		b.WriteString("  drain_delay = \"0s\"\n")
		if g.Owner != "" {
			fmt.Fprintf(&b, "  tags = { owner = %q }\n", g.Owner)
		}
		fmt.Fprintf(&b, "  instance {\n    provider   = simulator\n    type       = \"compute\"\n    properties = { note = %q }\n  }\n", g.Note)
		fmt.Fprintf(&b, "  flavor {\n    provider   = vanilla\n    properties = { tags = { tier = %q } }\n  }\n", g.Tier)
		if g.SimFlavor {
			b.WriteString("  flavor {\n    provider = simulator\n    type     = \"simulator\"\n  }\n")
		}
		if u := g.Update; u != nil {
			fmt.Fprintf(&b, "  update {\n    max_parallel    = %d\n    max_unavailable = %d\n  }\n", u.MaxParallel, u.MaxUnavailable)
		}
		b.WriteString("}\n")
	}
	_, owned := s.ownedLBs()
	lbs := append(slices.Clone(owned), s.ExtraLBs...)
	slices.Sort(lbs)
	for _, lb := range slices.Compact(lbs) {
		fmt.Fprintf(&b, "\nloadbalancer %q { provider = simulator }\n", lb)
	}
	for _, in := range s.Ingresses {
		fmt.Fprintf(&b, "\ningress %q {\n", in.Name)
		for _, r := range in.Rules {
			var groups []string
			for _, g := range r.Groups {
				groups = append(groups, "group."+g)
			}
			fmt.Fprintf(&b, "  rule {\n    loadbalancer = loadbalancer.%s\n    groups       = [%s]\n", r.LB, strings.Join(groups, ", "))
			for _, rt := range r.Routes {
				fmt.Fprintf(&b, "    route {\n      lb_port = %d\n      port    = %d\n", rt.LBPort, rt.Port)
				if rt.LBProtocol != "" {
					fmt.Fprintf(&b, "      lb_protocol = %q\n", rt.LBProtocol)
				}
				if rt.Protocol != "" {
					fmt.Fprintf(&b, "      protocol = %q\n", rt.Protocol)
				}
				if rt.Cert != "" {
					fmt.Fprintf(&b, "      certificate = %q\n", rt.Cert)
				}
				b.WriteString("    }\n")
			}
			b.WriteString("  }\n")
		}
		b.WriteString("}\n")
	}
	if e := s.Enrollment; e != nil {
		provider := "simulator"
		if e.Alias {
			provider = "simulator.nfs-auth"
		}
		fmt.Fprintf(&b, "\nenrollment \"nfs\" {\n  source = group.%s\n  target {\n    provider   = %s\n    type       = \"disk\"\n    properties = { host = member.id, iops = %d }\n  }\n}\n",
			e.Source, provider, e.IOPS)
	}
	return b.String()
}

func propQuote(xs []string) string {
	var q []string
	for _, x := range xs {
		q = append(q, fmt.Sprintf("%q", x))
	}
	return strings.Join(q, ", ")
}

// --- the generator ---

// propPetPool is the logical IDs group name may have: addresses of its own.
func propPetPool(name string) []string {
	i := slices.Index(propGroupNames, name)
	var out []string
	for n := 1; n <= 4; n++ {
		out = append(out, fmt.Sprintf("10.%d.0.%d", i+1, n))
	}
	return out
}

func propDrawPets(t *rapid.T, name string) []string {
	// logical_ids may not be empty: a pet group has 1–4.
	return propDrawSubset(t, propPetPool(name), 1, 4, "logical_ids")
}

// propDrawSubset draws lo..hi distinct elements of pool, in a random order.
func propDrawSubset(t *rapid.T, pool []string, lo, hi int, label string) []string {
	perm := rapid.Permutation(pool).Draw(t, label)
	return perm[:rapid.IntRange(lo, hi).Draw(t, label+"_count")]
}

func propDrawGroup(t *rapid.T, name string) *propGroup {
	g := &propGroup{
		Name:      name,
		Note:      rapid.SampledFrom([]string{"a", "b"}).Draw(t, "note"),
		Tier:      rapid.SampledFrom([]string{"web", "db"}).Draw(t, "tier"),
		SimFlavor: rapid.Bool().Draw(t, "sim_flavor"),
		Owner:     rapid.SampledFrom([]string{"", "ops", "dev"}).Draw(t, "owner"),
		Update:    propDrawUpdate(t),
	}
	if rapid.Bool().Draw(t, "pets") {
		g.Pets = propDrawPets(t, name)
	} else {
		g.Size = rapid.IntRange(0, 6).Draw(t, "size")
	}
	return g
}

func propDrawUpdate(t *rapid.T) *propUpdate {
	if rapid.IntRange(0, 3).Draw(t, "update_block") == 0 {
		return nil
	}
	return &propUpdate{
		MaxParallel:    rapid.IntRange(1, 3).Draw(t, "max_parallel"),
		MaxUnavailable: rapid.IntRange(1, 3).Draw(t, "max_unavailable"),
	}
}

func propDrawRoute(t *rapid.T, lbPort int) propRoute {
	r := propRoute{
		LBPort:     lbPort,
		LBProtocol: rapid.SampledFrom(propLBProtocols).Draw(t, "lb_protocol"),
		Port:       rapid.SampledFrom(propBackendPorts).Draw(t, "port"),
		Protocol:   rapid.SampledFrom(propBackendProtocols).Draw(t, "protocol"),
	}
	if r.LBProtocol == "https" || r.LBProtocol == "ssl" {
		r.Cert = rapid.SampledFrom([]string{"", "cert-a", "cert-b"}).Draw(t, "certificate")
	}
	return r
}

// propDrawRules draws the rules of an ingress over 1–3 of the load balancers
// free (see freeLBs), in a random order: each load balancer gets 1–2 rules, each
// rule 1–2 routes on ports no other rule on that load balancer publishes.
func propDrawRules(t *rapid.T, s *propStack, free []string) []propRule {
	lbs := propDrawSubset(t, free, 1, min(3, len(free)), "lbs")
	var rules []propRule
	for _, lb := range lbs {
		ports := rapid.Permutation(propLBPorts).Draw(t, "lb_ports")
		nRules := rapid.IntRange(1, 2).Draw(t, "rules")
		for range nRules {
			nRoutes := rapid.IntRange(1, min(2, len(ports))).Draw(t, "routes")
			r := propRule{
				LB:     lb,
				Groups: propDrawSubset(t, s.groupNames(), 1, len(s.Groups), "rule_groups"),
			}
			for _, p := range ports[:nRoutes] {
				r.Routes = append(r.Routes, propDrawRoute(t, p))
			}
			ports = ports[nRoutes:]
			rules = append(rules, r)
			if len(ports) == 0 {
				break
			}
		}
	}
	return rapid.Permutation(rules).Draw(t, "rule_order")
}

// freeLBs are the load balancers that no ingress, or only ingress except,
// names: those an ingress may take (the loader refuses two ingresses
// naming one load balancer).
func (s *propStack) freeLBs(except string) []string {
	owner, _ := s.ownedLBs()
	var out []string
	for _, lb := range propLBNames {
		if o, ok := owner[lb]; !ok || o == except {
			out = append(out, lb)
		}
	}
	return out
}

// propEdit is one kind of stack edit: applicable says whether it can be
// made to s, apply makes it; weight is how often it is drawn, relative to
// the others applicable.
type propEdit struct {
	name       string
	weight     int
	applicable func(s *propStack) bool
	apply      func(t *rapid.T, s *propStack)
}

func propHasGroups(s *propStack) bool { return len(s.Groups) > 0 }

func propPickGroup(t *rapid.T, s *propStack, ok func(*propGroup) bool) *propGroup {
	var names []string
	for _, g := range s.Groups {
		if ok == nil || ok(g) {
			names = append(names, g.Name)
		}
	}
	return s.group(rapid.SampledFrom(names).Draw(t, "group"))
}

func propIsCattle(g *propGroup) bool { return g.Pets == nil }
func propIsPets(g *propGroup) bool   { return g.Pets != nil }

func propAnyGroup(s *propStack, ok func(*propGroup) bool) bool {
	return slices.ContainsFunc(s.Groups, ok)
}

var propEdits = []propEdit{
	{"add group", 3, func(s *propStack) bool { return len(s.Groups) < len(propGroupNames) }, func(t *rapid.T, s *propStack) {
		var free []string
		for _, n := range propGroupNames {
			if s.group(n) == nil {
				free = append(free, n)
			}
		}
		s.Groups = append(s.Groups, propDrawGroup(t, rapid.SampledFrom(free).Draw(t, "new_group")))
		slices.SortFunc(s.Groups, func(a, b *propGroup) int { return strings.Compare(a.Name, b.Name) })
	}},
	{"remove group", 2, propHasGroups, func(t *rapid.T, s *propStack) {
		g := propPickGroup(t, s, nil)
		s.Groups = slices.DeleteFunc(s.Groups, func(x *propGroup) bool { return x == g })
		s.prune()
	}},
	{"resize cattle", 3, func(s *propStack) bool { return propAnyGroup(s, propIsCattle) }, func(t *rapid.T, s *propStack) {
		propPickGroup(t, s, propIsCattle).Size = rapid.IntRange(0, 6).Draw(t, "size")
	}},
	{"change pets", 2, func(s *propStack) bool { return propAnyGroup(s, propIsPets) }, func(t *rapid.T, s *propStack) {
		g := propPickGroup(t, s, propIsPets)
		g.Pets = propDrawPets(t, g.Name)
	}},
	{"cattle to pets", 1, func(s *propStack) bool { return propAnyGroup(s, propIsCattle) }, func(t *rapid.T, s *propStack) {
		g := propPickGroup(t, s, propIsCattle)
		g.Pets, g.Size = propDrawPets(t, g.Name), 0
	}},
	{"pets to cattle", 1, func(s *propStack) bool { return propAnyGroup(s, propIsPets) }, func(t *rapid.T, s *propStack) {
		g := propPickGroup(t, s, propIsPets)
		g.Pets, g.Size = nil, rapid.IntRange(0, 6).Draw(t, "size")
	}},
	{"change config (rolls)", 4, propHasGroups, func(t *rapid.T, s *propStack) {
		g := propPickGroup(t, s, nil)
		switch rapid.IntRange(0, 2).Draw(t, "config_field") {
		case 0:
			g.Note = map[string]string{"a": "b", "b": "a"}[g.Note]
		case 1:
			g.Tier = map[string]string{"web": "db", "db": "web"}[g.Tier]
		default:
			g.SimFlavor = !g.SimFlavor
		}
	}},
	{"change group tags and update (no roll)", 1, propHasGroups, func(t *rapid.T, s *propStack) {
		g := propPickGroup(t, s, nil)
		g.Owner = rapid.SampledFrom([]string{"", "ops", "dev"}).Draw(t, "owner")
		g.Update = propDrawUpdate(t)
	}},
	{"add ingress", 3, func(s *propStack) bool {
		return propHasGroups(s) && len(s.Ingresses) < len(propIngressNames) && len(s.freeLBs("")) > 0
	}, func(t *rapid.T, s *propStack) {
		var names []string
		for _, n := range propIngressNames {
			if !slices.ContainsFunc(s.Ingresses, func(in *propIngress) bool { return in.Name == n }) {
				names = append(names, n)
			}
		}
		in := &propIngress{Name: rapid.SampledFrom(names).Draw(t, "new_ingress")}
		in.Rules = propDrawRules(t, s, s.freeLBs(""))
		s.Ingresses = append(s.Ingresses, in)
		slices.SortFunc(s.Ingresses, func(a, b *propIngress) int { return strings.Compare(a.Name, b.Name) })
		s.prune()
	}},
	{"remove ingress", 1, func(s *propStack) bool { return len(s.Ingresses) > 0 }, func(t *rapid.T, s *propStack) {
		i := rapid.IntRange(0, len(s.Ingresses)-1).Draw(t, "ingress")
		s.Ingresses = slices.Delete(s.Ingresses, i, i+1)
	}},
	{"new rules", 2, func(s *propStack) bool { return len(s.Ingresses) > 0 }, func(t *rapid.T, s *propStack) {
		in := s.Ingresses[rapid.IntRange(0, len(s.Ingresses)-1).Draw(t, "ingress")]
		in.Rules = propDrawRules(t, s, s.freeLBs(in.Name))
		s.prune()
	}},
	{"change a route", 2, func(s *propStack) bool { return len(s.Ingresses) > 0 }, func(t *rapid.T, s *propStack) {
		in := s.Ingresses[rapid.IntRange(0, len(s.Ingresses)-1).Draw(t, "ingress")]
		r := &in.Rules[rapid.IntRange(0, len(in.Rules)-1).Draw(t, "rule")]
		i := rapid.IntRange(0, len(r.Routes)-1).Draw(t, "route")
		r.Routes[i] = propDrawRoute(t, r.Routes[i].LBPort)
	}},
	{"add enrollment", 3, func(s *propStack) bool { return propHasGroups(s) && s.Enrollment == nil }, func(t *rapid.T, s *propStack) {
		s.Enrollment = &propEnrollment{
			Source: propPickGroup(t, s, nil).Name,
			Alias:  rapid.IntRange(0, 3).Draw(t, "alias") > 0,
			IOPS:   rapid.SampledFrom([]int{10, 20}).Draw(t, "iops"),
		}
	}},
	{"remove enrollment", 1, func(s *propStack) bool { return s.Enrollment != nil }, func(t *rapid.T, s *propStack) {
		s.Enrollment = nil
	}},
	{"change enrollment", 3, func(s *propStack) bool { return s.Enrollment != nil }, func(t *rapid.T, s *propStack) {
		switch rapid.IntRange(0, 2).Draw(t, "enrollment_field") {
		case 0:
			s.Enrollment.Source = propPickGroup(t, s, nil).Name
		case 1:
			s.Enrollment.IOPS = map[int]int{10: 20, 20: 10}[s.Enrollment.IOPS]
		default:
			s.Enrollment.Alias = !s.Enrollment.Alias
		}
	}},
	{"declare unused load balancers", 1, func(*propStack) bool { return true }, func(t *rapid.T, s *propStack) {
		free := s.freeLBs("")
		if len(free) == 0 {
			s.ExtraLBs = nil
			return
		}
		s.ExtraLBs = propDrawSubset(t, free, 0, len(free), "extra_lbs")
		slices.Sort(s.ExtraLBs)
	}},
}

// propDrawEdit returns s after 1–3 edits, and their names. The first
// edit of a sequence (s empty) adds 1–3 groups, then, most often, an
// ingress and an enrollment.
func propDrawEdit(t *rapid.T, s *propStack) (*propStack, []string) {
	first := len(s.Groups) == 0 && len(s.Ingresses) == 0 && s.Enrollment == nil
	s = s.clone()
	var names []string
	do := func(e propEdit) {
		e.apply(t, s)
		names = append(names, e.name)
	}
	if first {
		for range rapid.IntRange(1, 3).Draw(t, "first_groups") {
			do(propEditNamed("add group"))
		}
		for _, name := range []string{"add ingress", "add enrollment"} {
			if e := propEditNamed(name); rapid.IntRange(0, 3).Draw(t, "first_"+name) > 0 && e.applicable(s) {
				do(e)
			}
		}
		return s, names
	}
	for range rapid.IntRange(1, 3).Draw(t, "edits") {
		var can []propEdit
		total := 0
		for _, e := range propEdits {
			if e.applicable(s) {
				can = append(can, e)
				total += e.weight
			}
		}
		n := rapid.IntRange(0, total-1).Draw(t, "edit")
		for _, e := range can {
			if n -= e.weight; n < 0 {
				do(e)
				break
			}
		}
	}
	return s, names
}

func propEditNamed(name string) propEdit {
	i := slices.IndexFunc(propEdits, func(e propEdit) bool { return e.name == name })
	return propEdits[i]
}

// --- running infrakit for a rapid check ---

// propCLI runs infrakit in a workdir for one rapid check and reports a
// failure to that check (so rapid shrinks it and prints its seed), where
// the workdir's own helpers would fail the whole test.
type propCLI struct {
	t *rapid.T
	w *workdir
}

func (c propCLI) run(args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "infrakit"), args...)
	cmd.Dir = c.w.dir
	cmd.Env = c.w.env
	cmd.Stdin = strings.NewReader("")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	res := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		c.t.Fatalf("timed out after %s: %s", commandTimeout, res)
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		c.t.Fatalf("infrakit %s: %v", strings.Join(args, " "), err)
	}
	return res
}

func (c propCLI) expect(code int, args ...string) result {
	c.t.Helper()
	res := c.run(args...)
	if res.code != code {
		c.t.Fatalf("want exit %d; %s", code, res)
	}
	return res
}

// jsonOf runs infrakit, which must succeed, and decodes its stdout into v.
func (c propCLI) jsonOf(v any, args ...string) result {
	c.t.Helper()
	res := c.expect(0, args...)
	if err := json.Unmarshal([]byte(res.stdout), v); err != nil {
		c.t.Fatalf("%v\n%s", err, res)
	}
	return res
}

// --- the world, read from the simulator's files ---

type propInstanceFile struct {
	ID         string            `json:"id"`
	LogicalID  *string           `json:"logical_id"`
	Tags       map[string]string `json:"tags"`
	Properties map[string]any    `json:"properties"`
	Address    string            `json:"address"`
	State      string            `json:"state"`
}

type propRouteFile struct {
	LBPort      int    `json:"lb_port"`
	LBProtocol  string `json:"lb_protocol"`
	Port        int    `json:"port"`
	Protocol    string `json:"protocol"`
	Certificate string `json:"certificate,omitempty"`
}

type propLBFile struct {
	Name     string          `json:"name"`
	Routes   []propRouteFile `json:"routes"`
	Backends []struct {
		ID      string `json:"id"`
		Address string `json:"address"`
	} `json:"backends"`
	HealthCheck *struct {
		BackendPort int `json:"backend_port"`
	} `json:"healthcheck"`
}

type propAuthFile struct {
	ID         string            `json:"id"`
	SourceID   string            `json:"source_id"`
	Properties map[string]any    `json:"properties"`
	Tags       map[string]string `json:"tags"`
}

// propWorld is everything the simulator holds.
type propWorld struct {
	instances map[string]propInstanceFile // by ID
	lbs       map[string]propLBFile       // by name; a load balancer never written is absent
	auths     map[string]propAuthFile     // by ID
}

func propReadFiles[T any](t *rapid.T, dir string) map[string]T {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]T{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v\n%s", f, err, b)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = v
	}
	return out
}

func (c propCLI) world() propWorld {
	c.t.Helper()
	root := filepath.Join(c.w.dir, ".infrakit", "simulator")
	return propWorld{
		instances: propReadFiles[propInstanceFile](c.t, filepath.Join(root, "instances", "compute")),
		lbs:       propReadFiles[propLBFile](c.t, filepath.Join(root, "loadbalancers")),
		auths:     propReadFiles[propAuthFile](c.t, filepath.Join(root, "authorizations", "disk")),
	}
}

// members returns the instances of group name, sorted by ID.
func (w propWorld) members(name string) []propInstanceFile {
	var out []propInstanceFile
	for _, m := range w.instances {
		if m.Tags["infrakit.stack"] == propStackName && m.Tags["infrakit.group"] == name {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b propInstanceFile) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (w propWorld) backendIDs(lb string) map[string]string {
	out := map[string]string{}
	for _, b := range w.lbs[lb].Backends {
		out[b.ID] = b.Address
	}
	return out
}

func (w propWorld) routes(lb string) map[int]propRouteFile {
	out := map[int]propRouteFile{}
	for _, r := range w.lbs[lb].Routes {
		out[r.LBPort] = r
	}
	return out
}

// --- checks ---

// propChecks makes rapid.Check run n checks unless -rapid.checks or
// RAPID_CHECKS asks for another number: each check runs the binaries a few
// dozen times.
func propChecks(t *testing.T, n int) {
	t.Helper()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	if _, env := os.LookupEnv("RAPID_CHECKS"); explicit || env {
		return
	}
	f := flag.Lookup("rapid.checks")
	if f == nil {
		t.Fatal("rapid registers no -rapid.checks flag")
	}
	old := f.Value.String()
	if err := f.Value.Set(fmt.Sprint(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// propMissing returns the keys of a not in b, sorted.
func propMissing[V any, W any](a map[string]V, b map[string]W) []string {
	var out []string
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
