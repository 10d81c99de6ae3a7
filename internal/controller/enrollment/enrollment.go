// Package enrollment keeps an external authorization list (NFS exports, through
// the nfs.Authorizer SPI) in step with the membership of a group: exactly one
// authorization per running member of the enrollment's source group, with
// properties rendered from that member.
//
// The package decides and acts on nothing. Diff is a pure function of the
// source members, what the source group wants, the authorizations the
// target lists and a render function; it returns Changes, a value that can
// be printed and tested without a provider. Package plan turns decisions
// into steps, and package execute carries them out through the nfs SPI.
//
// Decisions this package makes, which users see:
//
//   - Ownership is by tag: an authorization is this enrollment's when its
//     tags.EnrollmentName tag is the enrollment's name; it is for the member
//     named by its tags.EnrollmentSourceID tag (or, without that tag, its
//     SourceID). Authorizations without the name tag are never touched.
//   - Running members are authorized. A pending member is not authorized yet,
//     but an authorization it already has is kept as it is.
//   - A replacement is authorized before the instance it replaces is
//     revoked. The authorization of a member that left (gone from the
//     listing, or terminating) is held while the group waits for a
//     replacement, which Diff judges from what the group wants (Want: its
//     size, or its logical IDs), and revoked once none is awaited; held
//     ones are listed in Changes.Deferred. For a pet (its authorization
//     carries the member's logical ID in a tags.LogicalID tag) that is
//     while the group still wants the logical ID and no running member has
//     it: one authorization per logical ID is held, and the pass that
//     authorizes the running replacement revokes it. For cattle (and a
//     pet's authorization made before the tag was set) as many are held as
//     the group runs fewer members than it wants, less those held for
//     pets: a group that wants 10 and runs 9 holds one, and the pass that
//     authorizes its tenth running member revokes it. Which ones are held
//     goes by member ID (the group does not say which new member replaces
//     which), so passes hold the same ones. A group scaled down to what
//     runs, or destroyed (it wants nothing), holds none; a group that
//     cannot start replacements (a failing provider) holds them until it
//     can, or until it is scaled down or destroyed.
//   - An authorization's properties are the enrollment target's properties
//     rendered for the member (see config.EnrollmentTarget.RenderProperties).
//     Its Host, Volume and Options are read from the rendered properties
//     "host" and "volume" (strings) and "options" (a list of strings, or one
//     string), when present. A member whose authorization differs in any of
//     these is re-authorized: the new authorization is made, then the old one
//     revoked. Properties compare as JSON values (key order and number
//     spelling do not matter).
//   - Of several authorizations for one member, one that is up to date is
//     kept (the lowest ID) and the others are revoked.
//   - A member whose properties cannot be rendered keeps what it has; the
//     error is reported in Changes.Failed.
//   - When the target changes (another provider, alias included, or type),
//     apply revokes the enrollment's authorizations at the old target
//     (Retarget), each after its member's authorization at the new one
//     when the plan makes that. An authorization the new target lists too
//     (one store seen through both) stays: it is the new target's.
//   - What replaces an authorization is made before it is revoked: a plan
//     revokes a re-authorized member's old authorization after the new one
//     is made, and that of a member that leaves after the member replacing
//     it is authorized; across passes the holding rule above keeps that
//     true while replacements start.
package enrollment

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/controller/group"
	"github.com/infrakit/infrakit/internal/tags"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// Reasons a revocation gives.
const (
	// ReasonMemberGone: the member is not a live member of the source group.
	ReasonMemberGone = "member-gone"
	// ReasonDuplicate: the member has another authorization, which is kept.
	ReasonDuplicate = "duplicate"
	// ReasonReplaced: the member was re-authorized with new properties.
	ReasonReplaced = "replaced"
	// ReasonDestroy: the enrollment is destroyed (or freed with destroy_on_free).
	ReasonDestroy = "destroy"
	// ReasonRetarget: the enrollment's target changed; this is the old one.
	ReasonRetarget = "target-changed"
)

// Changes is what one enrollment needs (from Diff, Teardown or Retarget).
// Lists are sorted by member ID, then ID.
type Changes struct {
	Enrollment string
	// Authorize are new authorizations, for running members that have none.
	// Their IDs are empty: the authorizer gives them one.
	Authorize []nfs.Authorization
	// Reauthorize are members whose authorization is out of date: New is
	// authorized, then Old revoked.
	Reauthorize []Replacement
	// Revoke are authorizations to remove.
	Revoke []Revocation
	// Deferred are authorizations of members that left whose revocation
	// waits for their replacements (see the package doc); nothing is done
	// to them.
	Deferred []nfs.Authorization
	// Failed are members whose properties could not be rendered; what they
	// have is left alone.
	Failed []RenderFailure
	// Held is set when the source membership was unknown, so nothing changed.
	Held bool
	// Settings are changed attributes that need no call to the target (set
	// by plans, not by Diff).
	Settings []Setting
}

// Replacement is a member's out-of-date authorization and its successor.
type Replacement struct {
	Old nfs.Authorization
	New nfs.Authorization
}

// Revocation is an authorization to revoke and why.
type Revocation struct {
	Authorization nfs.Authorization
	Reason        string
}

// RenderFailure is a member whose target properties could not be rendered.
type RenderFailure struct {
	Member instance.ID `json:"member"`
	Err    error       `json:"-"`
	// Error is Err's text, for JSON.
	Error string `json:"error"`
}

// Want is what the source group wants, which decides how long the
// authorizations of members that left are held (see the package doc).
type Want struct {
	// Size is how many running members the group wants: its size, or its
	// number of distinct logical IDs.
	Size int `json:"size"`
	// LogicalIDs are a pet group's logical IDs; nil for cattle.
	LogicalIDs []string `json:"logical_ids,omitempty"`
}

// WantOf is what group g wants. A nil group (destroyed, or not in the
// stack) wants nothing, so nothing of it is held.
func WantOf(g *config.Group) Want {
	if g == nil {
		return Want{}
	}
	if g.Size != nil {
		return Want{Size: max(*g.Size, 0)}
	}
	w := Want{}
	for _, id := range g.LogicalIDs {
		if !slices.Contains(w.LogicalIDs, id) {
			w.LogicalIDs = append(w.LogicalIDs, id)
		}
	}
	w.Size = len(w.LogicalIDs)
	return w
}

// Empty reports whether there is nothing to do.
func (c Changes) Empty() bool {
	return len(c.Authorize) == 0 && len(c.Reauthorize) == 0 && len(c.Revoke) == 0
}

// Ours reports whether a is an authorization of the named enrollment.
func Ours(name string, a nfs.Authorization) bool {
	return name != "" && a.Tags[tags.EnrollmentName] == name
}

// SourceOf is the member an authorization is for: its source ID tag, else
// its SourceID.
func SourceOf(a nfs.Authorization) instance.ID {
	if id := a.Tags[tags.EnrollmentSourceID]; id != "" {
		return instance.ID(id)
	}
	return a.SourceID
}

// Authorization is the authorization an enrollment wants for a member, with
// the member's rendered properties; its ID is empty. A pet's carries its
// logical ID in a tags.LogicalID tag.
func Authorization(name string, m group.Member, properties json.RawMessage) nfs.Authorization {
	return AuthorizationFor(name, m, RenderedOf(properties))
}

// Rendered are a member's rendered target properties and what the
// authorization reads of them (host, volume, options), read once: a
// caller that keeps them (plan.RenderMemo) does not parse them again.
type Rendered struct {
	Properties   json.RawMessage
	Host, Volume string
	Options      []string
}

// RenderedOf reads host, volume and options out of rendered properties;
// properties that are not a JSON object leave them empty.
func RenderedOf(properties json.RawMessage) Rendered {
	r := Rendered{Properties: properties}
	var fields struct {
		Host    any `json:"host"`
		Volume  any `json:"volume"`
		Options any `json:"options"`
	}
	if json.Unmarshal(properties, &fields) != nil {
		return r
	}
	r.Host, _ = fields.Host.(string)
	r.Volume, _ = fields.Volume.(string)
	switch o := fields.Options.(type) {
	case string:
		r.Options = []string{o}
	case []any:
		for _, x := range o {
			if s, ok := x.(string); ok {
				r.Options = append(r.Options, s)
			}
		}
	}
	return r
}

// AuthorizationFor is Authorization of properties already read.
func AuthorizationFor(name string, m group.Member, r Rendered) nfs.Authorization {
	a := nfs.Authorization{
		SourceID:   m.ID,
		Properties: r.Properties,
		Host:       r.Host,
		Volume:     r.Volume,
		Options:    r.Options,
		Tags:       map[string]string{tags.EnrollmentName: name, tags.EnrollmentSourceID: string(m.ID)},
	}
	if m.LogicalID != "" {
		a.Tags[tags.LogicalID] = m.LogicalID
	}
	return a
}

// UpToDate reports whether an observed authorization is what want asks for:
// the same member, host, volume, options and properties (as JSON values).
func UpToDate(have, want nfs.Authorization) bool {
	return SourceOf(have) == SourceOf(want) &&
		holds(have, Rendered{Properties: want.Properties, Host: want.Host, Volume: want.Volume, Options: want.Options})
}

// holds reports whether an authorization carries what r renders: host,
// volume, options and properties (as JSON values). Diff checks it for
// every member on every plan, against the member's own authorizations, so
// it neither reads tags nor builds the authorization it compares with.
func holds(have nfs.Authorization, r Rendered) bool {
	if have.Host != r.Host || have.Volume != r.Volume || !slices.Equal(have.Options, r.Options) {
		return false
	}
	// The same bytes are the same JSON value; only others need the
	// (costly) canonical form.
	return bytes.Equal(have.Properties, r.Properties) ||
		bytes.Equal(canonical(have.Properties), canonical(r.Properties))
}

// canonical re-encodes a JSON value with sorted keys and plain numbers; an
// empty or null value is the empty object, as providers store "no properties".
func canonical(raw json.RawMessage) []byte {
	var v any
	if len(bytes.TrimSpace(raw)) == 0 || json.Unmarshal(raw, &v) != nil {
		if len(bytes.TrimSpace(raw)) == 0 {
			return []byte("{}")
		}
		return raw
	}
	if v == nil {
		return []byte("{}")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}
