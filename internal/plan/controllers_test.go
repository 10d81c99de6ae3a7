package plan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/controller/enrollment"
	"github.com/infrakit/infrakit/internal/controller/ingress"
	"github.com/infrakit/infrakit/sdk/loadbalancer"
	"github.com/infrakit/infrakit/sdk/nfs"
)

func TestControllersCountAndRender(t *testing.T) {
	route := loadbalancer.Route{LoadBalancerPort: 80, LoadBalancerProtocol: "https", Port: 80, Protocol: "http", Certificate: "c1"}
	tests := []struct {
		name        string
		ingresses   []IngressChange
		enrollments []EnrollmentChange
		changes     bool
		summary     Summary
		human       []string
	}{
		{
			name: "nothing to do",
			ingresses: []IngressChange{{Ingress: "web", Action: ActionNoOp,
				LoadBalancers: []ingress.Changes{{LoadBalancer: "lb1"}}}},
			enrollments: []EnrollmentChange{{Enrollment: "nfs", Action: ActionNoOp}},
			human:       []string{"No changes."},
		},
		{
			name: "first apply: routes now, members later",
			ingresses: []IngressChange{{Ingress: "web", Action: ActionCreate, FollowsGroups: []string{"miners"},
				LoadBalancers: []ingress.Changes{{LoadBalancer: "lb1", Publish: []loadbalancer.Route{route}}}}},
			enrollments: []EnrollmentChange{{Enrollment: "nfs", Action: ActionCreate, FollowsGroups: []string{"cattle"}}},
			changes:     true,
			summary:     Summary{Routes: 1},
			human: []string{`+ ingress "web"`, "+ route lb1:80 https -> 80 http (certificate c1)",
				`backends follow the members of group "miners"`, `+ enrollment "nfs"`,
				"1 route, 0 backends, 0 authorizations to change."},
		},
		{
			name: "backends and authorizations follow",
			ingresses: []IngressChange{{Ingress: "web", Action: ActionUpdate,
				LoadBalancers: []ingress.Changes{{LoadBalancer: "lb1",
					Register:   []loadbalancer.Backend{{ID: "i-1"}, {ID: "i-2"}},
					Deregister: []loadbalancer.Backend{{ID: "i-0"}}}}}},
			enrollments: []EnrollmentChange{{Enrollment: "nfs", Action: ActionUpdate,
				Changes: enrollment.Changes{Authorize: []nfs.Authorization{{SourceID: "i-1"}},
					Revoke: []enrollment.Revocation{{Authorization: nfs.Authorization{ID: "a-0"}, Reason: enrollment.ReasonMemberGone}}}}},
			changes: true,
			summary: Summary{Backends: 3, Authorizations: 2},
			human:   []string{"+ 2 backends on lb1", "- 1 backend on lb1", "+ 1 authorization", "- 1 authorization revoked"},
		},
		{
			name: "a setting alone is a change; kept authorizations are said",
			enrollments: []EnrollmentChange{{Enrollment: "nfs", Action: ActionUpdate,
				Changes: enrollment.Changes{
					Settings: []enrollment.Setting{{Attribute: "destroy_on_free", Old: "false", New: "true"}},
					Deferred: []nfs.Authorization{{ID: "a-0", SourceID: "i-0"}}}}},
			changes: true,
			human: []string{`~ enrollment "nfs"`, "~ destroy_on_free = false -> true",
				"1 authorization of members that left kept until their replacements run"},
		},
		{
			name:        "free and unknown change nothing",
			ingresses:   []IngressChange{{Ingress: "gone", Action: ActionFree}, {Ingress: "web", Action: ActionUnknown, Error: "lb down"}},
			enrollments: []EnrollmentChange{{Enrollment: "nfs", Action: ActionFree}},
			human: []string{"ingress.gone is free and not in the stack", "enrollment.nfs is free and not in the stack",
				`Warning: ingress "web" could not be planned`, "lb down"},
		},
		{
			name: "a load balancer the ingress no longer names is torn down",
			ingresses: []IngressChange{{Ingress: "web", Action: ActionUpdate, Released: []string{"lb3"},
				LoadBalancers: []ingress.Changes{
					{LoadBalancer: "lb4", Publish: []loadbalancer.Route{route}, Register: []loadbalancer.Backend{{ID: "i-1"}, {ID: "i-2"}}},
					{LoadBalancer: "lb3", Unpublish: []loadbalancer.Route{route}, Deregister: []loadbalancer.Backend{{ID: "i-1"}, {ID: "i-2"}}}}}},
			changes: true,
			summary: Summary{Routes: 2, Backends: 4},
			human: []string{`~ ingress "web"`, "+ route lb4:80 https -> 80 http (certificate c1)", "+ 2 backends on lb4",
				"- route lb3:80 https -> 80 http (certificate c1)", "- 2 backends on lb3",
				"# lb3 no longer in the ingress: what it published and registered there is taken down"},
		},
		{
			name: "a changed target revokes at the old one",
			enrollments: []EnrollmentChange{{Enrollment: "nfs", Action: ActionUpdate,
				Changes: enrollment.Changes{
					Settings:  []enrollment.Setting{{Attribute: "target", Old: `simulator.nfs-auth "disk"`, New: `nfs "disk"`}},
					Authorize: []nfs.Authorization{{SourceID: "i-1"}}},
				Retarget: &Retarget{From: `simulator.nfs-auth "disk"`, Changes: enrollment.Changes{
					Revoke: []enrollment.Revocation{{Authorization: nfs.Authorization{ID: "a-1", SourceID: "i-1"}, Reason: enrollment.ReasonRetarget}}}}}},
			changes: true,
			summary: Summary{Authorizations: 2},
			human: []string{`~ target = simulator.nfs-auth "disk" -> nfs "disk"`, "+ 1 authorization",
				`- 1 authorization revoked on the old target simulator.nfs-auth "disk"`},
		},
		{
			name:      "teardown",
			ingresses: []IngressChange{{Ingress: "web", Action: ActionDestroy, LoadBalancers: []ingress.Changes{{LoadBalancer: "lb1", Unpublish: []loadbalancer.Route{route}}}}},
			changes:   true,
			summary:   Summary{Routes: 1},
			human:     []string{`- ingress "web"`, "- route lb1:80 https -> 80 http"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Plan{FormatVersion: FormatVersion, Stack: "s"}
			p.AddControllers(tt.ingresses, tt.enrollments)
			if p.HasChanges() != tt.changes {
				t.Errorf("HasChanges = %v, want %v", p.HasChanges(), tt.changes)
			}
			if p.Summary != tt.summary {
				t.Errorf("Summary = %+v, want %+v", p.Summary, tt.summary)
			}
			var b bytes.Buffer
			if err := RenderHuman(&b, p, HumanOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, want := range tt.human {
				if !strings.Contains(b.String(), want) {
					t.Errorf("human plan lacks %q:\n%s", want, b.String())
				}
			}
			b.Reset()
			if err := RenderJSON(&b, p); err != nil {
				t.Fatal(err)
			}
			var j struct {
				Changes     bool              `json:"changes"`
				Ingresses   []json.RawMessage `json:"ingresses"`
				Enrollments []json.RawMessage `json:"enrollments"`
			}
			if err := json.Unmarshal(b.Bytes(), &j); err != nil {
				t.Fatal(err)
			}
			if j.Changes != tt.changes || len(j.Ingresses) != len(tt.ingresses) || len(j.Enrollments) != len(tt.enrollments) {
				t.Errorf("JSON plan = %s", b.String())
			}
		})
	}
}
