package status

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
)

// Out of scale-out mode the status has no "scale_out" and no owners; in it,
// "scale_out" has the contract's shape (objects sorted by kind then name,
// never-null lists), every group shows its owner's identity, and the
// scale-out metrics count what the loop tells them.
func TestScaleOutStatus(t *testing.T) {
	r := NewRecorder(Options{Identity: "w0"})
	r.SetGroup(GroupReport{Name: "g1", Desired: group.Desired{Size: size(1)},
		Members: []group.Member{member("a", instance.StateRunning, flavor.HealthHealthy)}})
	b, _ := json.Marshal(r.Status())
	if strings.Contains(string(b), `"scale_out"`) || strings.Contains(string(b), `"owner"`) {
		t.Fatalf("scale_out or owner outside scale-out mode: %s", b)
	}

	r.SetScaleOut(&ScaleOut{
		Member:     "6b8b4567",
		Members:    []Member{{ID: "6b8b4568", Identity: "w1"}, {ID: "6b8b4567", Identity: "w0"}},
		LeasesHeld: 2,
		Objects: []Object{
			{Kind: "ingress", Name: "web", Owner: "6b8b4568", OwnerIdentity: "w1"},
			{Kind: "group", Name: "g2"},
			{Kind: "group", Name: "g1", Owner: "6b8b4567", OwnerIdentity: "w0", Mine: true},
			{Kind: "enrollment", Name: "nfs", Owner: "6b8b4567", OwnerIdentity: "w0", Mine: true},
		},
	})
	b, err := json.Marshal(r.Status())
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Groups   []map[string]any `json:"groups"`
		ScaleOut map[string]any   `json:"scale_out"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Groups[0]["owner"] != "w0" {
		t.Errorf("group g1 owner = %v, want w0", m.Groups[0]["owner"])
	}
	so := m.ScaleOut
	if so["member"] != "6b8b4567" || so["leases_held"] != 2.0 {
		t.Errorf("scale_out = %v", so)
	}
	var order []string
	for _, o := range so["objects"].([]any) {
		ob := o.(map[string]any)
		for _, k := range []string{"kind", "name", "owner", "owner_identity", "mine"} {
			if _, ok := ob[k]; !ok {
				t.Errorf("object %v lacks %q", ob, k)
			}
		}
		order = append(order, ob["kind"].(string)+"/"+ob["name"].(string))
	}
	if got := strings.Join(order, " "); got != "enrollment/nfs group/g1 group/g2 ingress/web" {
		t.Errorf("objects in order %s, want by kind then name", got)
	}
	if ms := so["members"].([]any); len(ms) != 2 || ms[0].(map[string]any)["identity"] != "w0" {
		t.Errorf("members = %v, want both, by ID", ms)
	}

	r.LeaseMoved(LeaseAcquired)
	r.LeaseMoved(LeaseAcquired)
	r.LeaseMoved(LeaseReleased)
	r.FencedWriteRefused()
	r.GroupPassed("g1")
	r.GroupPassed("g1")
	base, c := serve(t, r)
	resp, body := get(t, c, base+PathMetrics)
	if resp.StatusCode != http.StatusOK {
		t.Fatal(resp.Status)
	}
	for _, line := range []string{
		`infrakit_leases_held 2`,
		`infrakit_lease_moves_total{direction="acquired"} 2`,
		`infrakit_lease_moves_total{direction="released"} 1`,
		`infrakit_fenced_writes_refused_total 1`,
		`infrakit_group_passes_total{group="g1"} 2`,
	} {
		if !strings.Contains(string(body), "\n"+line+"\n") {
			t.Errorf("scrape lacks line %q", line)
		}
	}

	// A group released goes from the status and its gauges; what this
	// process did stays counted.
	r.ReleaseGroup("g1")
	_, body = get(t, c, base+PathMetrics)
	if strings.Contains(string(body), `infrakit_instances{group="g1"`) || !strings.Contains(string(body), `infrakit_group_passes_total{group="g1"} 2`) {
		t.Errorf("after release:\n%s", body)
	}
	if len(r.Status().Groups) != 0 {
		t.Errorf("a released group is still in the status")
	}
	r.SetScaleOut(nil)
	if s := r.Status(); s.ScaleOut != nil {
		t.Errorf("scale_out after leaving scale-out mode: %+v", s.ScaleOut)
	}
}
