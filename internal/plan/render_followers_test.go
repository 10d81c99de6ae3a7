package plan

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
)

// followerPlan scales web up while its ingress drops lb2 and its
// enrollment moves to another target (and gains destroy_on_free), with a
// revocation an earlier apply left pending for an enrollment that is gone.
func followerPlan(t *testing.T) *Plan {
	_, doc, w := web(t, 2, 2)
	st := withEnrollment(withIngress(stackOf(cattleGroup("web", 3, "v1")), "test.com", []string{"lb1"}, "web"), "nfs", "web")
	st.Enrollments[0].Target.Provider = "nfs2"
	st.Enrollments[0].DestroyOnFree = true
	w.Authorizers[TargetKey("nfs2", nfsType)] = AuthorizerView{}
	gone := &config.Stack{Name: "mystack", Enrollments: []*config.Enrollment{{Name: "gone", Source: "web", Target: nfsTarget()}}}
	doc.Enrollments = map[string]*state.ControllerStatus{"gone": {Pending: []*config.Stack{gone}}}
	return compute(t, st, doc, w, Scope{})
}

const wantFollowersHuman = `infrakit will perform the following actions:

  # group.web will be updated in-place
  ~ group "web" {
      ~ instances = 2 -> 3
      + 1 new instance
    }

  # ingress.test.com will be updated
  ~ ingress "test.com" {
      + 1 backend on lb1 for new instances, once they run
      - route lb2:80 https -> 80 http
      - 2 backends on lb2
      # lb2 no longer in the ingress: what it published and registered there is taken down
    }

  # enrollment.nfs will be updated
  ~ enrollment "nfs" {
      ~ target = simulator.nfs-auth "disk" -> nfs2 "disk"
      ~ destroy_on_free = false -> true
      + 2 authorizations
      + 1 authorization for new instances, once they run
      - 2 authorizations revoked on simulator.nfs-auth "disk"
      # the target changed from simulator.nfs-auth "disk": what was made there is revoked once the new target has it
    }

  # enrollment.gone will be destroyed: its authorizations revoked
  - enrollment "gone" {
      # simulator.nfs-auth "disk": an earlier apply could not finish revoking there; finished now
    }

Plan: 1 instance to add, 0 to roll, 0 to destroy; 0 routes to publish, 1 to unpublish, 1 backend to register, 2 to deregister, 3 authorizations to make, 2 to revoke.
`

func TestRenderHumanFollowers(t *testing.T) {
	var b bytes.Buffer
	if err := RenderHuman(&b, followerPlan(t), HumanOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != wantFollowersHuman {
		t.Errorf("RenderHuman =\n%s\nwant\n%s\ndiff at: %q", got, wantFollowersHuman, firstDiff(got, wantFollowersHuman))
	}
}

func TestRenderJSONFollowers(t *testing.T) {
	p := followerPlan(t)
	var b bytes.Buffer
	if err := RenderJSON(&b, p); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Changes     bool             `json:"changes"`
		Ingresses   []map[string]any `json:"ingresses"`
		Enrollments []map[string]any `json:"enrollments"`
		Steps       []map[string]any `json:"steps"`
		Summary     Counts           `json:"summary"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if !got.Changes || got.Summary != p.Summary || len(got.Steps) != len(p.Steps) {
		t.Errorf("changes %v, summary %+v, %d steps", got.Changes, got.Summary, len(got.Steps))
	}
	if in := got.Ingresses[0]; in["ingress"] != "test.com" || in["action"] != "update" || in["released"].([]any)[0] != "lb2" {
		t.Errorf("ingress = %v", in)
	}
	if e := got.Enrollments[0]; e["retarget"] != `simulator.nfs-auth "disk"` || len(e["settings"].([]any)) != 2 {
		t.Errorf("enrollment = %v", e)
	}
	for _, s := range got.Steps {
		for _, k := range []string{"id", "kind", "object"} {
			if s[k] == nil {
				t.Errorf("step %v lacks %q", s, k)
			}
		}
	}
	// With nothing to say of followers, their lists are empty, not null.
	b.Reset()
	empty := compute(t, stackOf(), storedAs(stackOf(), nil), World{}, Scope{})
	if err := RenderJSON(&b, empty); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b.Bytes(), []byte(`"ingresses":[],"enrollments":[],"steps":[]`)) {
		t.Errorf("RenderJSON of an empty plan = %s", b.String())
	}
}

func TestCountsPhrases(t *testing.T) {
	for _, tc := range []struct {
		c             Counts
		followers     bool
		planned, done string
	}{
		{Counts{Add: 5}, false, "5 instances to add, 0 to roll, 0 to destroy.", "5 added, 0 rolled, 0 destroyed"},
		{Counts{Add: 1, Replace: 2, Destroy: 1}, false, "1 instance to add, 0 to roll, 2 to replace, 1 to destroy.",
			"1 added, 0 rolled, 2 replaced, 1 destroyed"},
		{Counts{Add: 15, Publish: 3, Register: 20, Authorize: 10}, true,
			"15 instances to add, 0 to roll, 0 to destroy; 3 routes to publish, 20 backends to register, 10 authorizations to make.",
			"15 added, 0 rolled, 0 destroyed; 3 routes published, 20 backends registered, 10 authorizations made"},
		{Counts{Roll: 2, Republish: 1, Unpublish: 1, Register: 2, Deregister: 2, Authorize: 2, Revoke: 2}, false,
			"0 instances to add, 2 to roll, 0 to destroy; 0 routes to publish, 1 to republish, 1 to unpublish, 2 backends to register, 2 to deregister, 2 authorizations to make, 2 to revoke.",
			"0 added, 2 rolled, 0 destroyed; 0 routes published, 1 republished, 1 unpublished, 2 backends registered, 2 deregistered, 2 authorizations made, 2 revoked"},
	} {
		if got := tc.c.PlanPhrase(tc.followers); got != tc.planned {
			t.Errorf("PlanPhrase(%+v) = %q, want %q", tc.c, got, tc.planned)
		}
		if got := tc.c.DonePhrase(tc.followers); got != tc.done {
			t.Errorf("DonePhrase(%+v) = %q, want %q", tc.c, got, tc.done)
		}
	}
	a, b := Counts{Add: 1, Revoke: 2}, Counts{Add: 2, Register: 3}
	if got := a.Plus(b); got != (Counts{Add: 3, Register: 3, Revoke: 2}) || got.Instances() != 3 || got.Followers() != 5 {
		t.Errorf("Plus = %+v", got)
	}
}
