package enrollment

import (
	"encoding/json"
	"errors"

	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// Changes travel as JSON in `plan -json` and in plan files, with
// authorizations in the shape of `enrollment describe -json` ({"id",
// "source_id", "properties"}) plus what else they carry:
//
//	{"enrollment": "nfs",
//	 "authorize": [{"source_id": "i-1", "host": "i-1", "properties": {"host": "i-1", "iops": 10},
//	                "tags": {"infrakit.enrollment.name": "nfs", ...}}],
//	 "reauthorize": [{"old": AUTHORIZATION, "new": AUTHORIZATION}],
//	 "revoke": [{"authorization": AUTHORIZATION, "reason": "member-gone"}],
//	 "deferred": [AUTHORIZATION],
//	 "failed": [{"member": "i-2", "error": "..."}], "held": true,
//	 "settings": [{"attribute": "destroy_on_free", "old": "false", "new": "true"}]}
//
// An authorization's "id" is left out until the authorizer has given it
// one, and so are its empty fields; so are empty lists and false flags.

type changesJSON struct {
	Enrollment  string              `json:"enrollment"`
	Authorize   []AuthorizationJSON `json:"authorize,omitempty"`
	Reauthorize []replacementJSON   `json:"reauthorize,omitempty"`
	Revoke      []revocationJSON    `json:"revoke,omitempty"`
	Deferred    []AuthorizationJSON `json:"deferred,omitempty"`
	Failed      []RenderFailure     `json:"failed,omitempty"`
	Held        bool                `json:"held,omitempty"`
	Settings    []Setting           `json:"settings,omitempty"`
}

type replacementJSON struct {
	Old AuthorizationJSON `json:"old"`
	New AuthorizationJSON `json:"new"`
}

type revocationJSON struct {
	Authorization AuthorizationJSON `json:"authorization"`
	Reason        string            `json:"reason"`
}

// AuthorizationJSON is an authorization in the CLI's JSON shapes.
type AuthorizationJSON struct {
	ID         string            `json:"id,omitempty"`
	SourceID   instance.ID       `json:"source_id"`
	Host       string            `json:"host,omitempty"`
	Volume     string            `json:"volume,omitempty"`
	Options    []string          `json:"options,omitempty"`
	Properties json.RawMessage   `json:"properties,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
}

// AuthorizationJSONOf is the JSON shape of a.
func AuthorizationJSONOf(a nfs.Authorization) AuthorizationJSON {
	return AuthorizationJSON{ID: a.ID, SourceID: a.SourceID, Host: a.Host, Volume: a.Volume, Options: a.Options,
		Properties: a.Properties, Tags: a.Tags}
}

func (j AuthorizationJSON) authorization() nfs.Authorization {
	return nfs.Authorization{ID: j.ID, SourceID: j.SourceID, Host: j.Host, Volume: j.Volume, Options: j.Options,
		Properties: j.Properties, Tags: j.Tags}
}

func authorizationsJSON(as []nfs.Authorization) []AuthorizationJSON {
	if as == nil {
		return nil
	}
	out := make([]AuthorizationJSON, len(as))
	for i, a := range as {
		out[i] = AuthorizationJSONOf(a)
	}
	return out
}

func authorizationsOf(js []AuthorizationJSON) []nfs.Authorization {
	if js == nil {
		return nil
	}
	out := make([]nfs.Authorization, len(js))
	for i, j := range js {
		out[i] = j.authorization()
	}
	return out
}

// MarshalJSON writes the changes in the CLI's JSON shapes (see above).
func (c Changes) MarshalJSON() ([]byte, error) {
	out := changesJSON{
		Enrollment: c.Enrollment,
		Authorize:  authorizationsJSON(c.Authorize),
		Deferred:   authorizationsJSON(c.Deferred),
		Failed:     c.Failed,
		Held:       c.Held,
		Settings:   c.Settings,
	}
	for _, r := range c.Reauthorize {
		out.Reauthorize = append(out.Reauthorize, replacementJSON{Old: AuthorizationJSONOf(r.Old), New: AuthorizationJSONOf(r.New)})
	}
	for _, r := range c.Revoke {
		out.Revoke = append(out.Revoke, revocationJSON{Authorization: AuthorizationJSONOf(r.Authorization), Reason: r.Reason})
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes. A render failure read back
// has its error as text only (Err is errors.New of it).
func (c *Changes) UnmarshalJSON(b []byte) error {
	var in changesJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	out := Changes{
		Enrollment: in.Enrollment,
		Authorize:  authorizationsOf(in.Authorize),
		Deferred:   authorizationsOf(in.Deferred),
		Failed:     in.Failed,
		Held:       in.Held,
		Settings:   in.Settings,
	}
	for _, r := range in.Reauthorize {
		out.Reauthorize = append(out.Reauthorize, Replacement{Old: r.Old.authorization(), New: r.New.authorization()})
	}
	for _, r := range in.Revoke {
		out.Revoke = append(out.Revoke, Revocation{Authorization: r.Authorization.authorization(), Reason: r.Reason})
	}
	for i := range out.Failed {
		if out.Failed[i].Err == nil && out.Failed[i].Error != "" {
			out.Failed[i].Err = errors.New(out.Failed[i].Error)
		}
	}
	*c = out
	return nil
}
