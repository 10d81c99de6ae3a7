package enrollment

import (
	"encoding/json"

	"github.com/hashicorp/hcl/v2"
	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/zclconf/go-cty/cty"
)

// View is an enrollment's authorizations as `enrollment describe -json`
// prints them.
type View struct {
	Enrollment     string              `json:"enrollment"`
	Authorizations []AuthorizationView `json:"authorizations"`
}

// AuthorizationView is one authorization in a View.
type AuthorizationView struct {
	ID         string          `json:"id"`
	SourceID   instance.ID     `json:"source_id"`
	Properties json.RawMessage `json:"properties"`
}

// ViewOf is the view of an enrollment's authorizations.
func ViewOf(name string, auths []nfs.Authorization) View {
	v := View{Enrollment: name, Authorizations: make([]AuthorizationView, 0, len(auths))}
	for _, a := range auths {
		props := a.Properties
		if len(props) == 0 {
			props = json.RawMessage("{}")
		}
		v.Authorizations = append(v.Authorizations, AuthorizationView{ID: a.ID, SourceID: SourceOf(a), Properties: props})
	}
	return v
}

// NeedsProperties reports whether the target properties use the members'
// properties (member.properties, or member as a whole), so the source must be
// listed with properties (DescribeInstances withProperties).
func NeedsProperties(t *config.EnrollmentTarget) bool {
	expr, diags := t.PropertiesExpression()
	if diags.HasErrors() {
		return false
	}
	for _, tr := range expr.Variables() {
		if tr.RootName() != "member" {
			continue
		}
		if len(tr) < 2 {
			return true
		}
		switch step := tr[1].(type) {
		case hcl.TraverseAttr:
			if step.Name == "properties" {
				return true
			}
		case hcl.TraverseIndex:
			k := step.Key
			if k.Type() != cty.String || !k.IsKnown() || k.IsNull() || k.AsString() == "properties" {
				return true
			}
		default:
			return true
		}
	}
	return false
}
