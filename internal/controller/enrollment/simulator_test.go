package enrollment

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// These tests decide with the pure functions (Diff, Teardown, Retarget)
// from what a real simulator lists, carry the changes out through the nfs
// SPI as a plan's steps would, and check what the simulator then holds: the
// decisions hold against a real provider's listing (how it stores
// properties and tags), and once carried out leave nothing to do.

// authState is what the authorizer holds for the enrollment: by member, the
// host and iops of its authorizations.
func authState(t *testing.T, a nfs.Authorizer) map[instance.ID][]string {
	t.Helper()
	all, err := a.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[instance.ID][]string{}
	for _, x := range all {
		if !Ours("nfs", x) {
			continue
		}
		var p struct {
			Host string `json:"host"`
			IOPS int    `json:"iops"`
		}
		if err := json.Unmarshal(x.Properties, &p); err != nil {
			t.Fatal(err)
		}
		if x.Host != p.Host || x.SourceID != SourceOf(x) {
			t.Fatalf("authorization %+v: Host field and properties disagree", x)
		}
		out[SourceOf(x)] = append(out[SourceOf(x)], fmt.Sprintf("host=%s iops=%d", p.Host, p.IOPS))
	}
	return out
}

// checkFollows fails unless the enrollment holds exactly one authorization
// per source instance, with host = its ID and the given iops.
func checkFollows(t *testing.T, a nfs.Authorizer, source []instance.Description, iops int) {
	t.Helper()
	got := authState(t, a)
	if len(got) != len(source) {
		t.Fatalf("%d members authorized, want %d: %v", len(got), len(source), got)
	}
	for _, d := range source {
		if want := []string{fmt.Sprintf("host=%s iops=%d", d.ID, iops)}; !slices.Equal(got[d.ID], want) {
			t.Fatalf("member %s has %v, want %v", d.ID, got[d.ID], want)
		}
	}
}

func list(t *testing.T, a nfs.Authorizer) []nfs.Authorization {
	t.Helper()
	all, err := a.Describe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// carryOut makes the changes through the SPI as a plan's steps would:
// what replaces an authorization is made before it is revoked.
func carryOut(t *testing.T, a nfs.Authorizer, ch Changes) {
	t.Helper()
	ctx := context.Background()
	for _, x := range ch.Authorize {
		if _, err := a.Authorize(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range ch.Reauthorize {
		if _, err := a.Authorize(ctx, r.New); err != nil {
			t.Fatal(err)
		}
		if err := a.Revoke(ctx, r.Old.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range ch.Revoke {
		if err := a.Revoke(ctx, r.Authorization.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// diffAt is Diff of what a lists now, for the members described.
func diffAt(t *testing.T, a nfs.Authorizer, source []instance.Description, want Want, props string) Changes {
	t.Helper()
	return Diff("nfs", group.MembersFromDescriptions(source, nil), want, list(t, a), e2eRender(t, props, source...))
}

// Authorizations follow membership through a real authorizer: members are
// authorized, the authorizations of members that left are held while the
// group runs fewer than it wants and revoked once their replacements run,
// a change of the target properties re-authorizes every member, and the
// enrollment's destroy revokes its own only.
func TestDiffFollowsMembership(t *testing.T) {
	ctx := context.Background()
	sim, _ := startSimulator(t)
	auth := sim.Authorizer("disk")
	// Someone else's authorization, which must survive everything.
	if _, err := auth.Authorize(ctx, nfs.Authorization{SourceID: "elsewhere", Host: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	props := e2eEnrollment().Target.Properties
	cattle := provision(t, sim, "cattle", 10)
	want := Want{Size: 10}
	ch := diffAt(t, auth, cattle, want, props)
	if len(ch.Authorize) != 10 || len(ch.Revoke)+len(ch.Reauthorize) != 0 {
		t.Fatalf("first diff %+v", ch)
	}
	carryOut(t, auth, ch)
	checkFollows(t, auth, cattle, 10)
	// What the simulator stores is up to date as Diff judges it.
	if ch := diffAt(t, auth, cattle, want, props); !ch.Empty() || len(ch.Deferred) != 0 {
		t.Fatalf("diff of what was authorized %+v", ch)
	}

	// Three members vanish: their authorizations are held for the
	// replacements the group awaits.
	gone := cattle[:3]
	for _, d := range gone {
		if err := sim.Instance("compute").Destroy(ctx, d.ID, instance.ReasonUnhealthy); err != nil {
			t.Fatal(err)
		}
	}
	cattle = describe(t, sim, "cattle")
	ch = diffAt(t, auth, cattle, want, props)
	if !ch.Empty() || len(ch.Deferred) != 3 {
		t.Fatalf("diff while 3 replacements are awaited %+v, want 3 held", ch)
	}
	// The replacements run: they are authorized, the held ones revoked.
	provision(t, sim, "cattle", 3)
	cattle = describe(t, sim, "cattle")
	ch = diffAt(t, auth, cattle, want, props)
	if len(ch.Authorize) != 3 || len(ch.Revoke) != 3 || len(ch.Deferred) != 0 {
		t.Fatalf("diff once the replacements run %+v", ch)
	}
	for _, r := range ch.Revoke {
		if r.Reason != ReasonMemberGone || !slices.ContainsFunc(gone, func(d instance.Description) bool { return d.ID == SourceOf(r.Authorization) }) {
			t.Fatalf("revokes %+v, want the members gone", r)
		}
	}
	carryOut(t, auth, ch)
	checkFollows(t, auth, cattle, 10)

	// The target properties change: every member is re-authorized.
	props20 := `{ host = member.id, iops = 20 }`
	ch = diffAt(t, auth, cattle, want, props20)
	if len(ch.Reauthorize) != 10 || len(ch.Authorize)+len(ch.Revoke) != 0 {
		t.Fatalf("diff after the properties changed %+v", ch)
	}
	carryOut(t, auth, ch)
	checkFollows(t, auth, cattle, 20)

	// Destroy: ours are revoked, the foreign one stays.
	carryOut(t, auth, Teardown("nfs", list(t, auth), ReasonDestroy))
	if all := list(t, auth); len(all) != 1 || all[0].SourceID != "elsewhere" {
		t.Fatalf("after the teardown the authorizer holds %+v", all)
	}
}

// Properties that use member.properties are rendered from the listing
// with properties; a member whose properties lack what they use is
// reported and keeps what it has.
func TestDiffRendersMemberProperties(t *testing.T) {
	sim, _ := startSimulator(t)
	auth := sim.Authorizer("disk")
	cattle := provision(t, sim, "cattle", 2)
	props := `{ host = member.id, zone = member.properties.zone }`
	if !NeedsProperties(&config.EnrollmentTarget{Properties: props}) {
		t.Fatal("the target uses member.properties")
	}
	cattle[1].Properties = json.RawMessage(`{"other":1}`)
	ch := diffAt(t, auth, cattle, Want{Size: 2}, props)
	if len(ch.Authorize) != 1 || ch.Authorize[0].SourceID != cattle[0].ID || !strings.Contains(string(ch.Authorize[0].Properties), `"zone":"z1"`) {
		t.Fatalf("diff %+v", ch)
	}
	if len(ch.Failed) != 1 || ch.Failed[0].Member != cattle[1].ID || !strings.Contains(ch.Failed[0].Error, string(cattle[1].ID)) {
		t.Fatalf("failed %+v, want %s named", ch.Failed, cattle[1].ID)
	}
}

// An enrollment moved to another authorizer revokes at the old one what
// the new one does not list, leaving others' authorizations. Through one
// store (a second process on the same directory: two aliases of one
// provider) it revokes nothing.
func TestRetargetThroughStores(t *testing.T) {
	ctx := context.Background()
	oldSim, oldDir := startSimulator(t)
	newSim, _ := startSimulator(t)
	was := oldSim.Authorizer("disk")
	if _, err := was.Authorize(ctx, nfs.Authorization{SourceID: "elsewhere", Host: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	props := e2eEnrollment().Target.Properties
	cattle := provision(t, oldSim, "cattle", 4)
	carryOut(t, was, diffAt(t, was, cattle, Want{Size: 4}, props))

	same := startSimulatorOn(t, oldDir).Authorizer("disk")
	if ch := Retarget("nfs", list(t, was), list(t, same)); !ch.Empty() {
		t.Fatalf("retarget through one store %+v", ch)
	}
	if ch := diffAt(t, same, cattle, Want{Size: 4}, props); !ch.Empty() {
		t.Fatalf("the same store through another process needs %+v", ch)
	}

	now := newSim.Authorizer("disk")
	ch := diffAt(t, now, cattle, Want{Size: 4}, props)
	if len(ch.Authorize) != 4 {
		t.Fatalf("new target diff %+v", ch)
	}
	carryOut(t, now, ch)
	ch = Retarget("nfs", list(t, was), list(t, now))
	if len(ch.Revoke) != 4 || ch.Revoke[0].Reason != ReasonRetarget {
		t.Fatalf("retarget %+v", ch)
	}
	carryOut(t, was, ch)
	if left := list(t, was); len(left) != 1 || left[0].SourceID != "elsewhere" {
		t.Fatalf("old target holds %+v, want only the foreign authorization", left)
	}
	checkFollows(t, now, cattle, 10)
}
