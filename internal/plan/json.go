package plan

import (
	"encoding/json"
	"io"

	"github.com/infrakit/infrakit/sdk/instance"
)

// JSONFormatVersion versions the shape RenderJSON writes. The minor number
// grows when fields are added; the major one when a field changes meaning
// or goes away.
const JSONFormatVersion = "2.0"

// JSONPlan is the machine-readable plan (`plan -json`), one JSON object:
//
//	{
//	  "format_version": "2.0",
//	  "stack": "mystack",
//	  "changes": true,
//	  "groups": [
//	    {"group": "cattle", "action": "update", "before": 10, "after": 12,
//	     "create": 2, "create_logical_ids": [], "destroy": [], "roll": []},
//	    {"group": "db", "action": "roll", "before": 3, "after": 3,
//	     "create": 0, "create_logical_ids": [], "destroy": [], "roll": ["i-1", "i-2"]},
//	    {"group": "web", "action": "unknown", ..., "error": "provider ..."}
//	  ],
//	  "summary": {"add": 2, "roll": 2, "destroy": 0}
//	}
//
// Every group appears, no-op ones included, in plan order. "action" is one
// of the Action values; "create" counts the members to create and
// "create_logical_ids" names the pets among them; "destroy" and "roll" list
// instance IDs (always arrays, never null); "error" is set only for
// "unknown". "changes" is Plan.HasChanges.
type JSONPlan struct {
	FormatVersion string      `json:"format_version"`
	Stack         string      `json:"stack"`
	Changes       bool        `json:"changes"`
	Groups        []JSONGroup `json:"groups"`
	Summary       Summary     `json:"summary"`
	// Ingresses and Enrollments (added in 1.1) are the plan's
	// IngressChange and EnrollmentChange values; always arrays. Summary
	// then also counts "routes", "backends" and "authorizations".
	Ingresses   []IngressChange    `json:"ingresses"`
	Enrollments []EnrollmentChange `json:"enrollments"`
}

// JSONGroup is one group of a JSONPlan.
type JSONGroup struct {
	Group            string        `json:"group"`
	Action           Action        `json:"action"`
	Before           int           `json:"before"`
	After            int           `json:"after"`
	Create           int           `json:"create"`
	CreateLogicalIDs []string      `json:"create_logical_ids"`
	Destroy          []instance.ID `json:"destroy"`
	Roll             []instance.ID `json:"roll"`
	Error            string        `json:"error,omitempty"`
}

// NewJSONPlan builds the machine-readable shape of p.
func NewJSONPlan(p *Plan) JSONPlan {
	out := JSONPlan{
		FormatVersion: JSONFormatVersion,
		Stack:         p.Stack,
		Changes:       p.HasChanges(),
		Groups:        make([]JSONGroup, 0, len(p.Groups)),
		Summary:       p.Summary,
		Ingresses:     append([]IngressChange{}, p.Ingresses...),
		Enrollments:   append([]EnrollmentChange{}, p.Enrollments...),
	}
	for _, g := range p.Groups {
		jg := JSONGroup{
			Group:            g.Group,
			Action:           g.Action,
			Before:           g.Before,
			After:            g.After,
			Create:           len(g.Create),
			CreateLogicalIDs: []string{},
			Destroy:          make([]instance.ID, 0, len(g.Destroy)),
			Roll:             append(make([]instance.ID, 0, len(g.Roll)), g.Roll...),
			Error:            g.Error,
		}
		for _, c := range g.Create {
			if c.LogicalID != "" {
				jg.CreateLogicalIDs = append(jg.CreateLogicalIDs, c.LogicalID)
			}
		}
		for _, d := range g.Destroy {
			jg.Destroy = append(jg.Destroy, d.ID)
		}
		out.Groups = append(out.Groups, jg)
	}
	return out
}

// RenderJSON writes NewJSONPlan(p) as one line of JSON.
func RenderJSON(w io.Writer, p *Plan) error {
	return json.NewEncoder(w).Encode(NewJSONPlan(p))
}
