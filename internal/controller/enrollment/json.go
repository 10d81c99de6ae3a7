package enrollment

import (
	"encoding/json"

	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// AuthorizationJSON is an authorization in the CLI's JSON shapes (`plan
// -json` steps, plan files): that of `enrollment describe -json` ({"id",
// "source_id", "properties"}) plus what else it carries. Its "id" is left
// out until the authorizer has given it one, and so are its empty fields.
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

// Authorization is the authorization j shapes.
func (j AuthorizationJSON) Authorization() nfs.Authorization {
	return nfs.Authorization{ID: j.ID, SourceID: j.SourceID, Host: j.Host, Volume: j.Volume, Options: j.Options,
		Properties: j.Properties, Tags: j.Tags}
}
