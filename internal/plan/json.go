package plan

import (
	"encoding/json"
	"github.com/infrakit/infrakit/internal/autoscale"
	"io"

	"github.com/infrakit/infrakit/sdk/instance"
)

// JSONFormatVersion versions the shape RenderJSON writes. The minor number
// grows when fields are added; the major one when a field changes meaning
// or goes away.
const JSONFormatVersion = "3.1"

// JSONPlan is the machine-readable plan (`plan -json`), one JSON object:
//
//	{
//	  "format_version": "3.0",
//	  "stack": "mystack",
//	  "changes": true,
//	  "groups": [
//	    {"group": "cattle", "action": "update", "before": 10, "after": 12,
//	     "create": 2, "create_logical_ids": [], "destroy": [], "replace": [], "roll": []},
//	    {"group": "db", "action": "roll", "before": 3, "after": 3, ...,
//	     "roll": ["i-1", "i-2"], "roll_batches": 2},
//	    {"group": "web", "action": "unknown", ..., "error": "provider ..."}
//	  ],
//	  "ingresses": [{"ingress": "test.com", "action": "update", ...}],
//	  "enrollments": [{"enrollment": "nfs", "action": "update", ...}],
//	  "steps": [{"id": 1, "kind": "record", ...}, {"id": 2, "kind": "provision", "object": "group.cattle", "after": [1]}, ...],
//	  "summary": {"add": 2, "roll": 2, "replace": 0, "destroy": 0, "publish": 0, ...}
//	}
//
// Every group appears, no-op ones included, in plan order. "action" is one
// of the Action values; "create" counts the members to add and
// "create_logical_ids" names the pets among them; "destroy", "replace" and
// "roll" list instance IDs (always arrays, never null); "error" is set
// only for "unknown". "changes" is Plan.HasChanges. "steps" is the work,
// with the dependencies ("after") the executor honours; "summary" counts
// it with the same fields `apply -json` reports as done.
type JSONPlan struct {
	FormatVersion string             `json:"format_version"`
	Stack         string             `json:"stack"`
	Changes       bool               `json:"changes"`
	Groups        []JSONGroup        `json:"groups"`
	Ingresses     []IngressChange    `json:"ingresses"`
	Enrollments   []EnrollmentChange `json:"enrollments"`
	Steps         []Step             `json:"steps"`
	Summary       Counts             `json:"summary"`
	// Autoscale is Plan.Autoscale: whose size each autoscaled group gets.
	Autoscale []autoscale.Ownership `json:"autoscale,omitempty"`
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
	Replace          []instance.ID `json:"replace"`
	Roll             []instance.ID `json:"roll"`
	RollBatches      int           `json:"roll_batches,omitempty"`
	RollWait         string        `json:"roll_wait,omitempty"`
	Error            string        `json:"error,omitempty"`
}

// NewJSONPlan builds the machine-readable shape of p.
func NewJSONPlan(p *Plan) JSONPlan {
	out := JSONPlan{
		FormatVersion: JSONFormatVersion,
		Stack:         p.Stack,
		Changes:       p.HasChanges(),
		Groups:        make([]JSONGroup, 0, len(p.Groups)),
		Ingresses:     append([]IngressChange{}, p.Ingresses...),
		Enrollments:   append([]EnrollmentChange{}, p.Enrollments...),
		Steps:         append([]Step{}, p.Steps...),
		Summary:       p.Summary,
		Autoscale:     p.Autoscale,
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
			Replace:          make([]instance.ID, 0, len(g.Replace)),
			Roll:             make([]instance.ID, 0, g.Rolled()),
			RollBatches:      len(g.Roll),
			RollWait:         g.RollWait,
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
		for _, r := range g.Replace {
			jg.Replace = append(jg.Replace, r.Old)
		}
		for _, b := range g.Roll {
			for _, r := range b {
				jg.Roll = append(jg.Roll, r.Old)
			}
		}
		out.Groups = append(out.Groups, jg)
	}
	return out
}

// RenderJSON writes NewJSONPlan(p) as one line of JSON.
func RenderJSON(w io.Writer, p *Plan) error {
	return json.NewEncoder(w).Encode(NewJSONPlan(p))
}
