package enrollment

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
)

const (
	running     = instance.StateRunning
	pending     = instance.StatePending
	terminating = instance.StateTerminating
)

func member(id string, st instance.State) group.Member {
	return group.Member{ID: instance.ID(id), State: st}
}

// e2eEnrollment is the enrollment of DESIGN.md's e2e stack.
func e2eEnrollment() *config.Enrollment {
	return &config.Enrollment{
		Name:   "nfs",
		Source: "cattle",
		Target: config.EnrollmentTarget{
			Provider:   "simulator.nfs-auth",
			Type:       "disk",
			Properties: `{ host = member.id, iops = 10 }`,
		},
		SyncInterval: config.Duration(5 * time.Second),
	}
}

// e2eRender renders target properties src through config, as a plan
// does: member is the member's description in descs, else what the member
// says of itself.
func e2eRender(t testing.TB, src string, descs ...instance.Description) func(group.Member) (json.RawMessage, error) {
	t.Helper()
	target := &config.EnrollmentTarget{Provider: "simulator.nfs-auth", Type: "disk", Properties: src}
	if _, diags := target.PropertiesExpression(); diags.HasErrors() {
		t.Fatal(diags)
	}
	return func(m group.Member) (json.RawMessage, error) {
		d := instance.Description{ID: m.ID, Address: m.Address, State: m.State}
		if i := slices.IndexFunc(descs, func(x instance.Description) bool { return x.ID == m.ID }); i >= 0 {
			d = descs[i]
		}
		v, err := config.MemberValue(d)
		if err != nil {
			return nil, err
		}
		props, err := target.RenderProperties(v)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", m.ID, err)
		}
		return props, nil
	}
}

// authz is an authorization of enrollment "nfs" for member src.
func authz(id, src, props string) nfs.Authorization {
	a := Authorization("nfs", group.Member{ID: instance.ID(src)}, json.RawMessage(props))
	a.ID = id
	return a
}

// pet is a member with a logical ID.
func pet(id, logical string, st instance.State) group.Member {
	return group.Member{ID: instance.ID(id), LogicalID: logical, State: st}
}

// petAuthz is an up-to-date authorization of enrollment "nfs" for pet src.
func petAuthz(id, src, logical string) nfs.Authorization {
	a := Authorization("nfs", pet(src, logical, running), json.RawMessage(`{"host":"`+src+`","iops":10}`))
	a.ID = id
	return a
}

func TestDiff(t *testing.T) {
	const props = `{ host = member.id, iops = 10 }`
	const (
		c1 = `{"host":"c1","iops":10}`
		c2 = `{"host":"c2","iops":10}`
		c3 = `{"host":"c3","iops":10}`
		c5 = `{"host":"c5","iops":10}`
	)
	foreign := nfs.Authorization{ID: "auth-f", SourceID: "c1", Host: "c1"}                                          // no enrollment tag
	other := nfs.Authorization{ID: "auth-o", SourceID: "c9", Tags: map[string]string{tags.EnrollmentName: "other"}} // another enrollment's
	tests := []struct {
		name     string
		source   []group.Member
		observed []nfs.Authorization
		// group is what the source group wants; nil: as many as it lists
		// live (none is being replaced).
		group *Want
		want  Changes
	}{
		{
			name:     "new running members are authorized; pending ones wait",
			source:   []group.Member{member("c2", running), member("c1", running), member("c3", pending), member("c4", "")},
			observed: []nfs.Authorization{foreign, other},
			want: Changes{Authorize: []nfs.Authorization{
				authz("", "c1", `{"host":"c1","iops":10}`),
				authz("", "c2", `{"host":"c2","iops":10}`),
				authz("", "c4", `{"host":"c4","iops":10}`),
			}},
		},
		{
			name:     "converged, whatever the JSON spelling",
			source:   []group.Member{member("c1", running), member("c2", running)},
			observed: []nfs.Authorization{authz("a1", "c1", `{"host":"c1","iops":10}`), authz("a2", "c2", `{ "iops": 10.0, "host": "c2" }`), foreign},
		},
		{
			name:     "a pending member keeps what it has",
			source:   []group.Member{member("c1", pending)},
			observed: []nfs.Authorization{authz("a1", "c1", `{"host":"stale"}`)},
		},
		{
			name:   "gone and terminating members are revoked; others' are untouched",
			source: []group.Member{member("c1", running), member("c2", terminating)},
			observed: []nfs.Authorization{
				authz("a1", "c1", `{"host":"c1","iops":10}`), authz("a2", "c2", `{"host":"c2","iops":10}`),
				authz("a3", "c3", `{"host":"c3","iops":10}`), foreign, other,
			},
			want: Changes{Revoke: []Revocation{
				{Authorization: authz("a2", "c2", `{"host":"c2","iops":10}`), Reason: ReasonMemberGone},
				{Authorization: authz("a3", "c3", `{"host":"c3","iops":10}`), Reason: ReasonMemberGone},
			}},
		},
		{
			name:     "a member gone while the group runs fewer than it wants: held",
			source:   []group.Member{member("c1", running), member("c2", running)},
			observed: []nfs.Authorization{authz("a1", "c1", c1), authz("a2", "c2", c2), authz("a3", "c3", c3)},
			group:    &Want{Size: 3},
			want:     Changes{Deferred: []nfs.Authorization{authz("a3", "c3", c3)}},
		},
		{
			name:     "its replacement pending: still held",
			source:   []group.Member{member("c1", running), member("c2", running), member("c4", pending), member("c3", terminating)},
			observed: []nfs.Authorization{authz("a1", "c1", c1), authz("a2", "c2", c2), authz("a3", "c3", c3)},
			group:    &Want{Size: 3},
			want:     Changes{Deferred: []nfs.Authorization{authz("a3", "c3", c3)}},
		},
		{
			name:     "its replacement running: authorized, and the held one revoked",
			source:   []group.Member{member("c1", running), member("c2", running), member("c4", running)},
			observed: []nfs.Authorization{authz("a1", "c1", c1), authz("a2", "c2", c2), authz("a3", "c3", c3)},
			group:    &Want{Size: 3},
			want: Changes{
				Authorize: []nfs.Authorization{authz("", "c4", `{"host":"c4","iops":10}`)},
				Revoke:    []Revocation{{Authorization: authz("a3", "c3", c3), Reason: ReasonMemberGone}},
			},
		},
		{
			name:     "two gone, one short: the first by member ID is held",
			source:   []group.Member{member("c1", running), member("c2", running), member("c4", running)},
			observed: []nfs.Authorization{authz("a5", "c5", c5), authz("a1", "c1", c1), authz("a2", "c2", c2), authz("a3", "c3", c3)},
			group:    &Want{Size: 4},
			want: Changes{
				Authorize: []nfs.Authorization{authz("", "c4", `{"host":"c4","iops":10}`)},
				Revoke:    []Revocation{{Authorization: authz("a5", "c5", c5), Reason: ReasonMemberGone}},
				Deferred:  []nfs.Authorization{authz("a3", "c3", c3)},
			},
		},
		{
			name:     "scaled down to what runs: revoked",
			source:   []group.Member{member("c1", running), member("c2", terminating)},
			observed: []nfs.Authorization{authz("a1", "c1", c1), authz("a2", "c2", c2)},
			group:    &Want{Size: 1},
			want:     Changes{Revoke: []Revocation{{Authorization: authz("a2", "c2", c2), Reason: ReasonMemberGone}}},
		},
		{
			name:     "destroyed: everything revoked",
			source:   []group.Member{member("c1", terminating)},
			observed: []nfs.Authorization{authz("a1", "c1", c1), authz("a2", "c2", c2)},
			group:    &Want{},
			want: Changes{Revoke: []Revocation{
				{Authorization: authz("a1", "c1", c1), Reason: ReasonMemberGone},
				{Authorization: authz("a2", "c2", c2), Reason: ReasonMemberGone},
			}},
		},
		{
			name: "pets: held until a running member has the logical ID",
			source: []group.Member{
				pet("x1", "p1", running), pet("x2b", "p2", pending), pet("x3", "p3", running), pet("x4", "p4", running),
			},
			observed: []nfs.Authorization{
				petAuthz("a1", "x1", "p1"), petAuthz("a2", "x2", "p2"), // p2's replacement is pending: held
				petAuthz("a3", "x3", "p3"), petAuthz("a5", "x5", "p5"), // p5 is no longer wanted: revoked
				petAuthz("a9", "x9", "p1"), // p1 runs again as x1: revoked
				petAuthz("a4", "x4", "p4"),
			},
			// p4 runs but is no longer wanted (the group destroys it next):
			// the counts say nothing is short, the logical IDs that p2 is.
			group: &Want{Size: 3, LogicalIDs: []string{"p1", "p2", "p3"}},
			want: Changes{
				Revoke: []Revocation{
					{Authorization: petAuthz("a5", "x5", "p5"), Reason: ReasonMemberGone},
					{Authorization: petAuthz("a9", "x9", "p1"), Reason: ReasonMemberGone},
				},
				Deferred: []nfs.Authorization{petAuthz("a2", "x2", "p2")},
			},
		},
		{
			name:     "pets: an authorization without the logical ID tag is held by count",
			source:   []group.Member{pet("x1", "p1", running)},
			observed: []nfs.Authorization{petAuthz("a1", "x1", "p1"), authz("a2", "x2", `{"host":"x2","iops":10}`), authz("a3", "x3", `{"host":"x3","iops":10}`)},
			group:    &Want{Size: 3, LogicalIDs: []string{"p1", "p2", "p3"}},
			want: Changes{Deferred: []nfs.Authorization{
				authz("a2", "x2", `{"host":"x2","iops":10}`), authz("a3", "x3", `{"host":"x3","iops":10}`),
			}},
		},
		{
			name:     "pets: tagged holds count against the shortfall of untagged ones",
			source:   []group.Member{pet("x1", "p1", running)},
			observed: []nfs.Authorization{petAuthz("a1", "x1", "p1"), petAuthz("a2", "x2", "p2"), authz("a3", "x3", `{"host":"x3","iops":10}`), authz("a4", "x4", `{"host":"x4","iops":10}`)},
			group:    &Want{Size: 3, LogicalIDs: []string{"p1", "p2", "p3"}},
			want: Changes{
				Revoke:   []Revocation{{Authorization: authz("a4", "x4", `{"host":"x4","iops":10}`), Reason: ReasonMemberGone}},
				Deferred: []nfs.Authorization{petAuthz("a2", "x2", "p2"), authz("a3", "x3", `{"host":"x3","iops":10}`)},
			},
		},
		{
			name:     "changed properties: re-authorize",
			source:   []group.Member{member("c1", running)},
			observed: []nfs.Authorization{authz("a1", "c1", `{"host":"c1","iops":5}`)},
			want: Changes{Reauthorize: []Replacement{{
				Old: authz("a1", "c1", `{"host":"c1","iops":5}`),
				New: authz("", "c1", `{"host":"c1","iops":10}`),
			}}},
		},
		{
			name:   "duplicates: the up-to-date one stays",
			source: []group.Member{member("c1", running)},
			observed: []nfs.Authorization{
				authz("a3", "c1", `{"host":"c1","iops":10}`), authz("a1", "c1", `{"host":"c1","iops":5}`),
				authz("a2", "c1", `{"host":"c1","iops":10}`),
			},
			want: Changes{Revoke: []Revocation{
				{Authorization: authz("a1", "c1", `{"host":"c1","iops":5}`), Reason: ReasonDuplicate},
				{Authorization: authz("a3", "c1", `{"host":"c1","iops":10}`), Reason: ReasonDuplicate},
			}},
		},
		{
			name:   "duplicates, none up to date: re-authorize the first, revoke the rest",
			source: []group.Member{member("c1", running)},
			observed: []nfs.Authorization{
				authz("a2", "c1", `{"host":"c1","iops":1}`), authz("a1", "c1", `{"host":"c1","iops":2}`),
			},
			want: Changes{
				Reauthorize: []Replacement{{Old: authz("a1", "c1", `{"host":"c1","iops":2}`), New: authz("", "c1", `{"host":"c1","iops":10}`)}},
				Revoke:      []Revocation{{Authorization: authz("a2", "c1", `{"host":"c1","iops":1}`), Reason: ReasonDuplicate}},
			},
		},
		{
			name:     "the source ID falls back to SourceID without the tag",
			source:   []group.Member{member("c1", running)},
			observed: []nfs.Authorization{{ID: "a1", SourceID: "c1", Host: "c1", Properties: json.RawMessage(`{"host":"c1","iops":10}`), Tags: map[string]string{tags.EnrollmentName: "nfs"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Enrollment = "nfs"
			group := Want{Size: live(tt.source)}
			if tt.group != nil {
				group = *tt.group
			}
			got := Diff("nfs", tt.source, group, tt.observed, e2eRender(t, props))
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Diff:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// live counts the members that are pending or running.
func live(source []group.Member) int {
	n := 0
	for _, m := range source {
		if m.State != terminating {
			n++
		}
	}
	return n
}

func TestDiffRenderFailureKeepsWhatIsThere(t *testing.T) {
	boom := errors.New("boom")
	render := func(m group.Member) (json.RawMessage, error) {
		if m.ID == "c1" {
			return nil, boom
		}
		return json.RawMessage(`{"host":"` + string(m.ID) + `"}`), nil
	}
	got := Diff("nfs", []group.Member{member("c1", running), member("c2", running)}, Want{Size: 2},
		[]nfs.Authorization{authz("a1", "c1", `{"host":"old"}`)}, render)
	if len(got.Failed) != 1 || got.Failed[0].Member != "c1" || !errors.Is(got.Failed[0].Err, boom) {
		t.Fatalf("failed = %+v", got.Failed)
	}
	if len(got.Revoke) != 0 || len(got.Reauthorize) != 0 || len(got.Authorize) != 1 || got.Authorize[0].SourceID != "c2" {
		t.Fatalf("changes = %+v", got)
	}
}

func TestAuthorization(t *testing.T) {
	tests := []struct {
		props        string
		host, volume string
		options      []string
	}{
		{`{"host":"c1","volume":"/vol/a","options":["rw","sync"]}`, "c1", "/vol/a", []string{"rw", "sync"}},
		{`{"host":"c1","options":"ro"}`, "c1", "", []string{"ro"}},
		{`{"host":7,"volume":null,"options":[1,"rw"]}`, "", "", []string{"rw"}},
		{`{}`, "", "", nil},
		{``, "", "", nil},
	}
	for _, tt := range tests {
		a := Authorization("nfs", member("c1", running), json.RawMessage(tt.props))
		if a.Host != tt.host || a.Volume != tt.volume || !reflect.DeepEqual(a.Options, tt.options) {
			t.Errorf("%s: host %q volume %q options %q", tt.props, a.Host, a.Volume, a.Options)
		}
		if a.SourceID != "c1" || a.Tags[tags.EnrollmentName] != "nfs" || a.Tags[tags.EnrollmentSourceID] != "c1" || a.ID != "" {
			t.Errorf("%s: %+v", tt.props, a)
		}
		if _, ok := a.Tags[tags.LogicalID]; ok {
			t.Errorf("%s: cattle's authorization has a logical ID: %+v", tt.props, a.Tags)
		}
	}
	// A pet's carries its logical ID, which holds it for the pet's replacement.
	if a := Authorization("nfs", pet("x1", "10.0.0.1", running), nil); a.Tags[tags.LogicalID] != "10.0.0.1" {
		t.Errorf("a pet's authorization: %+v", a.Tags)
	}
}

// Teardown revokes every authorization of the enrollment (by its name
// tag), for the reason given, by member; nothing else is touched.
func TestTeardown(t *testing.T) {
	others := authz("x-1", "c1", `{}`)
	others.Tags[tags.EnrollmentName] = "other"
	observed := []nfs.Authorization{authz("a2", "c2", `{}`), authz("a1", "c1", `{}`), authz("a0", "c2", `{}`), {ID: "f", SourceID: "c1"}, others}
	ch := Teardown("nfs", observed, ReasonDestroy)
	var got []string
	for _, r := range ch.Revoke {
		got = append(got, fmt.Sprintf("%s (%s, member %s)", r.Authorization.ID, r.Reason, SourceOf(r.Authorization)))
	}
	want := []string{"a1 (destroy, member c1)", "a0 (destroy, member c2)", "a2 (destroy, member c2)"}
	if !slices.Equal(got, want) || ch.Enrollment != "nfs" || len(ch.Authorize)+len(ch.Reauthorize)+len(ch.Deferred) != 0 {
		t.Fatalf("Teardown revokes %v (%+v), want %v", got, ch, want)
	}
	if ch := Teardown("nfs", nil, ReasonDestroy); !ch.Empty() {
		t.Fatalf("Teardown of nothing = %+v", ch)
	}
}

func TestNeedsProperties(t *testing.T) {
	tests := map[string]bool{
		`{ host = member.id, iops = 10 }`:      false,
		`{ t = member.tags["tier"] }`:          false,
		``:                                     false,
		`{ z = member.properties.zone }`:       true,
		`{ z = member["properties"]["zone"] }`: true,
		`member`:                               true,
		`{ a = "${member.address}:${member.id}" }`: false,
	}
	for src, want := range tests {
		if got := NeedsProperties(&config.EnrollmentTarget{Properties: src}); got != want {
			t.Errorf("NeedsProperties(%s) = %v, want %v", src, got, want)
		}
	}
}

// A changed target revokes the enrollment's authorizations at the old one,
// but not those the new target lists too (one store seen through both),
// nor other enrollments'.
func TestRetarget(t *testing.T) {
	others := authz("x-1", "i-1", `{}`)
	others.Tags[tags.EnrollmentName] = "other"
	old := []nfs.Authorization{authz("a-2", "i-2", `{}`), authz("a-1", "i-1", `{}`), others}
	tests := []struct {
		name    string
		current []nfs.Authorization
		want    []string
	}{
		{name: "another store: all of ours go", want: []string{"a-1", "a-2"}},
		{name: "one store: nothing goes", current: old},
		{name: "partly shared", current: []nfs.Authorization{authz("a-2", "i-2", `{}`)}, want: []string{"a-1"}},
		{name: "an ID the new target lists for another enrollment is no proof", current: []nfs.Authorization{others, func() nfs.Authorization {
			a := authz("a-1", "i-1", `{}`)
			a.Tags[tags.EnrollmentName] = "other"
			return a
		}()}, want: []string{"a-1", "a-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := Retarget("nfs", old, tt.current)
			var got []string
			for _, r := range ch.Revoke {
				if r.Reason != ReasonRetarget {
					t.Fatalf("reason %q", r.Reason)
				}
				got = append(got, r.Authorization.ID)
			}
			if !slices.Equal(got, tt.want) || ch.Enrollment != "nfs" || len(ch.Authorize) > 0 {
				t.Fatalf("Retarget revokes %v (%+v), want %v", got, ch, tt.want)
			}
		})
	}
}

func TestTargetChanged(t *testing.T) {
	base := e2eEnrollment()
	for _, tt := range []struct {
		name   string
		change func(*config.Enrollment)
		want   bool
	}{
		{"same", func(*config.Enrollment) {}, false},
		{"properties are not the target", func(e *config.Enrollment) { e.Target.Properties = `{ host = member.address }` }, false},
		{"provider alias", func(e *config.Enrollment) { e.Target.Provider = "simulator" }, true},
		{"type", func(e *config.Enrollment) { e.Target.Type = "nfs" }, true},
	} {
		e := e2eEnrollment()
		tt.change(e)
		if got := TargetChanged(base, e); got != tt.want {
			t.Errorf("%s: TargetChanged = %v", tt.name, got)
		}
	}
	if TargetChanged(nil, base) || TargetChanged(base, nil) {
		t.Error("a new or removed enrollment has no target change")
	}
}
