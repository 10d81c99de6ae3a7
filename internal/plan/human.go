package plan

import (
	"fmt"
	"io"
	"strings"
)

// HumanOptions change how RenderHuman writes.
type HumanOptions struct {
	// Color marks the change symbols with ANSI colors, for a terminal.
	Color bool
	// MaxListed caps the instances listed per group and kind of change (the
	// rest are counted); 0 means 10, a negative value lists all.
	MaxListed int
}

// RenderHuman writes the plan for people, in Terraform's vocabulary:
//
//	  # group.miners will be created
//	  + group "miners" {
//	      + instances = 5
//	    }
//
//	Plan: 5 instances to add, 0 to roll, 0 to destroy.
//
// "~" marks an object updated in place (size change, repair, backends),
// "-/+" a roll (members replaced), "-" a destroyed object. The counts of
// the "Plan:" line are the plan's Summary: what apply reports when every
// step succeeds. Without changes it writes "No changes. Your stack matches
// the desired configuration." Objects that could not be observed get a
// warning at the end.
func RenderHuman(w io.Writer, p *Plan, o HumanOptions) error {
	r := &human{color: o.Color, max: o.MaxListed, byObject: stepsByObject(p.Steps)}
	if r.max == 0 {
		r.max = 10
	}
	changes := p.HasChanges()
	if changes {
		r.printf("%s\n\n", r.bold("infrakit will perform the following actions:"))
	}
	for _, g := range p.Groups {
		switch g.Action {
		case ActionCreate, ActionUpdate, ActionRoll, ActionDestroy, ActionResume:
			r.group(g)
		case ActionFree:
			r.printf("  # group.%s is free and not in the stack: its %s left untouched\n\n", g.Group, plural(g.Before, "instance")+isAre(g.Before))
		}
	}
	r.followers(p)
	if changes {
		r.printf("%s %s\n", r.bold("Plan:"), p.Summary.PlanPhrase(len(p.Ingresses)+len(p.Enrollments) > 0))
	} else {
		r.printf("%s Your stack matches the desired configuration.\n", r.bold("No changes."))
	}
	r.warnings(p)
	_, err := io.WriteString(w, r.b.String())
	return err
}

// PlanPhrase is the tail of the "Plan:" line: "5 instances to add, 0 to
// roll, 0 to destroy." and, with followers, "; 3 routes to publish, 20
// backends to register, 10 authorizations to make." (removals added when
// there are any).
func (c Counts) PlanPhrase(followers bool) string {
	s := fmt.Sprintf("%s to add, %d to roll", plural(c.Add, "instance"), c.Roll)
	if c.Replace > 0 {
		s += fmt.Sprintf(", %d to replace", c.Replace)
	}
	s += fmt.Sprintf(", %d to destroy", c.Destroy)
	if !followers && c.Followers() == 0 {
		return s + "."
	}
	return s + "; " + c.followerPhrase(map[string]string{
		"publish": "to publish", "republish": "to republish", "unpublish": "to unpublish",
		"register": "to register", "deregister": "to deregister", "authorize": "to make", "revoke": "to revoke",
	}) + "."
}

// DonePhrase is the tail of the "Apply complete!" line for counts of what
// was done: "5 added, 0 rolled, 0 destroyed" and, with followers, "; 3
// routes published, 20 backends registered, 10 authorizations made". The
// same fields as PlanPhrase, in the same order.
func (c Counts) DonePhrase(followers bool) string {
	s := fmt.Sprintf("%d added, %d rolled", c.Add, c.Roll)
	if c.Replace > 0 {
		s += fmt.Sprintf(", %d replaced", c.Replace)
	}
	s += fmt.Sprintf(", %d destroyed", c.Destroy)
	if !followers && c.Followers() == 0 {
		return s
	}
	return s + "; " + c.followerPhrase(map[string]string{
		"publish": "published", "republish": "republished", "unpublish": "unpublished",
		"register": "registered", "deregister": "deregistered", "authorize": "made", "revoke": "revoked",
	})
}

// followerPhrase says the route, backend and authorization counts with the
// verbs given, leaving out republish, unpublish, deregister and revoke when
// they are zero.
func (c Counts) followerPhrase(verb map[string]string) string {
	routes := fmt.Sprintf("%s %s", plural(c.Publish, "route"), verb["publish"])
	if c.Republish > 0 {
		routes += fmt.Sprintf(", %d %s", c.Republish, verb["republish"])
	}
	if c.Unpublish > 0 {
		routes += fmt.Sprintf(", %d %s", c.Unpublish, verb["unpublish"])
	}
	backends := fmt.Sprintf("%s %s", plural(c.Register, "backend"), verb["register"])
	if c.Deregister > 0 {
		backends += fmt.Sprintf(", %d %s", c.Deregister, verb["deregister"])
	}
	auths := fmt.Sprintf("%s %s", plural(c.Authorize, "authorization"), verb["authorize"])
	if c.Revoke > 0 {
		auths += fmt.Sprintf(", %d %s", c.Revoke, verb["revoke"])
	}
	return routes + ", " + backends + ", " + auths
}

type human struct {
	b        strings.Builder
	color    bool
	max      int
	byObject map[string][]*Step
}

const (
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	red    = "\x1b[31m"
	bold   = "\x1b[1m"
	reset  = "\x1b[0m"
)

func (r *human) printf(format string, args ...any) { fmt.Fprintf(&r.b, format, args...) }

func (r *human) paint(code, s string) string {
	if !r.color {
		return s
	}
	return code + s + reset
}

func (r *human) bold(s string) string { return r.paint(bold, s) }

// sym returns a change symbol right-aligned in three columns, colored.
func (r *human) sym(s string) string {
	pad := strings.Repeat(" ", 3-len(s))
	switch s {
	case "+":
		return pad + r.paint(green, s)
	case "~":
		return pad + r.paint(yellow, s)
	case "-":
		return pad + r.paint(red, s)
	case "-/+":
		return r.paint(red, "-") + "/" + r.paint(green, "+")
	}
	return pad + s
}

// attr writes one line inside a block.
func (r *human) attr(sym, format string, args ...any) {
	r.printf("    %s %s\n", r.sym(sym), fmt.Sprintf(format, args...))
}

// list writes one line per item, at most r.max of them, then counts the rest.
func (r *human) list(n int, line func(i int)) {
	shown := n
	if r.max > 0 && n > r.max {
		shown = r.max
	}
	for i := range shown {
		line(i)
	}
	if shown < n {
		r.printf("      # (%d more not shown)\n", n-shown)
	}
}

func (r *human) group(g GroupChange) {
	sym, what := "~", "will be updated in-place"
	switch g.Action {
	case ActionCreate:
		sym, what = "+", "will be created"
	case ActionRoll:
		sym, what = "-/+", fmt.Sprintf("will be rolled: %s will be replaced", plural(g.Rolled(), "instance"))
		if g.UpdateStopped {
			what += " (its rolling update was stopped; apply resumes it)"
		}
	case ActionDestroy:
		sym, what = "-", "will be destroyed"
	case ActionResume:
		what = "is free and will be managed again"
		if g.WasDestroying {
			what = "was being destroyed and will be managed again"
		}
	}
	r.printf("  # group.%s %s\n", g.Group, what)
	r.printf("%s group %q {\n", r.sym(sym), g.Group)
	switch g.Action {
	case ActionCreate:
		r.attr("+", "instances = %d", g.After)
	case ActionDestroy:
		r.attr("-", "instances = %d", g.Before)
	default:
		if g.Action == ActionResume {
			r.attr("~", "managed = false -> true")
		}
		if g.Before != g.After {
			r.attr("~", "instances = %d -> %d", g.Before, g.After)
		}
	}
	var pets []string
	cattle := 0
	for _, c := range g.Create {
		if c.LogicalID != "" {
			pets = append(pets, c.LogicalID)
		} else {
			cattle++
		}
	}
	if cattle > 0 && g.Action != ActionCreate {
		r.attr("+", "%s", plural(cattle, "new instance"))
	}
	r.list(len(pets), func(i int) { r.attr("+", "instance (logical_id = %q)", pets[i]) })
	r.list(len(g.Destroy), func(i int) {
		d := g.Destroy[i]
		if g.Action == ActionDestroy {
			r.attr("-", "instance %q", d.ID)
		} else {
			r.attr("-", "instance %q (%s)", d.ID, d.Reason)
		}
	})
	r.list(len(g.Replace), func(i int) { r.attr("-/+", "instance %q (%s)", g.Replace[i].Old, g.Replace[i].Reason) })
	var rolled []Replacement
	for _, b := range g.Roll {
		rolled = append(rolled, b...)
	}
	r.list(len(rolled), func(i int) { r.attr("-/+", "instance %q", rolled[i].Old) })
	if len(g.Roll) > 1 {
		r.printf("      # in %d batches, each once the one before it is done\n", len(g.Roll))
	}
	if g.RollWait != "" {
		r.printf("      # out-of-date instances left for later: %s\n", g.RollWait)
	}
	r.printf("    }\n\n")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func isAre(n int) string {
	if n == 1 {
		return " is"
	}
	return " are"
}

// stepsByObject indexes steps by object. It points into steps rather
// than copying them: a plan of 10,000 members has some 37,000 steps of
// about 300 bytes each, and copying them all cost an apply tens of MB.
func stepsByObject(steps []Step) map[string][]*Step {
	out := map[string][]*Step{}
	for i := range steps {
		out[steps[i].Object] = append(out[steps[i].Object], &steps[i])
	}
	return out
}
