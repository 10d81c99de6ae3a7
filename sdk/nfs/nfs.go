// Package nfs is the SPI of NFS authorizers: providers that keep an external
// authorization list (NFS exports) for member instances.
package nfs

import (
	"context"
	"encoding/json"

	"github.com/infrakit/infrakit/sdk/instance"
)

// Authorization lets one member instance use a volume.
//
// Options, Properties and Tags of what Describe returns are read-only: an
// authorizer may share them with its own records.
type Authorization struct {
	// ID is assigned by the authorizer on Authorize.
	ID string
	// SourceID is the member instance the authorization is for.
	SourceID instance.ID
	Host     string
	Volume   string
	Options  []string
	// Properties are the rendered target properties (a JSON object).
	Properties json.RawMessage
	Tags       map[string]string
}

// Authorizer is the NFS authorizer SPI for one authorizer type.
type Authorizer interface {
	Validate(ctx context.Context, properties json.RawMessage) error
	Describe(ctx context.Context) ([]Authorization, error)
	// Authorize records auth and returns its ID.
	Authorize(ctx context.Context, auth Authorization) (string, error)
	// Revoke removes an authorization; revoking one that is gone is not an error.
	Revoke(ctx context.Context, id string) error
}
