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
// "~" marks a group updated in place (size change, repair), "-/+" a roll
// (members replaced), "-" a destroyed group. Without changes it writes "No
// changes. Your stack matches the desired configuration." Groups that could
// not be observed get a warning at the end.
func RenderHuman(w io.Writer, p *Plan, o HumanOptions) error {
	r := &human{color: o.Color, max: o.MaxListed}
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
	r.controllers(p)
	if changes {
		r.printf("%s %s to add, %d to roll, %d to destroy.%s\n",
			r.bold("Plan:"), plural(p.Summary.Add, "instance"), p.Summary.Roll, p.Summary.Destroy, controllerSummary(p))
	} else {
		r.printf("%s Your stack matches the desired configuration.\n", r.bold("No changes."))
	}
	for _, g := range p.Groups {
		if g.Action == ActionUnknown {
			r.printf("\n%s group %q could not be observed\n\n  %s\n\nIts changes are not part of this plan.\n",
				r.paint(yellow, "Warning:"), g.Group, g.Error)
		}
	}
	r.controllerWarnings(p)
	_, err := io.WriteString(w, r.b.String())
	return err
}

type human struct {
	b     strings.Builder
	color bool
	max   int
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

// attr writes one line inside a group block.
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
		sym, what = "-/+", fmt.Sprintf("will be rolled: %s will be replaced", plural(len(g.Roll), "instance"))
		if g.UpdateStopped {
			what += " (its rolling update is stopped)"
		}
	case ActionDestroy:
		sym, what = "-", "will be destroyed"
	case ActionResume:
		what = "is free and will be managed again"
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
	r.list(len(g.Roll), func(i int) { r.attr("-/+", "instance %q", g.Roll[i]) })
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
