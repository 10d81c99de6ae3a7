package plugin

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
)

func authorizationToProto(a nfs.Authorization) *pb.Authorization {
	return &pb.Authorization{
		Id:         a.ID,
		SourceId:   string(a.SourceID),
		Host:       a.Host,
		Volume:     a.Volume,
		Options:    a.Options,
		Properties: a.Properties,
		Tags:       a.Tags,
	}
}

func authorizationFromProto(a *pb.Authorization) nfs.Authorization {
	return nfs.Authorization{
		ID:         a.GetId(),
		SourceID:   instance.ID(a.GetSourceId()),
		Host:       a.GetHost(),
		Volume:     a.GetVolume(),
		Options:    a.GetOptions(),
		Properties: rawJSON(a.GetProperties()),
		Tags:       a.GetTags(),
	}
}

// authorizerServer serves the Authorizer service from ServeConfig.Authorizers.
type authorizerServer struct {
	pb.UnimplementedAuthorizerServer
	s *server
}

func (x authorizerServer) Validate(ctx context.Context, req *pb.AuthorizerValidateRequest) (*pb.AuthorizerValidateResponse, error) {
	a, err := x.s.authorizer(req.GetType())
	if err != nil {
		return nil, err
	}
	diags, err := diagnosticsOrStatus(a.Validate(ctx, rawJSON(req.GetProperties())))
	if err != nil {
		return nil, err
	}
	return &pb.AuthorizerValidateResponse{Diagnostics: diags}, nil
}

func (x authorizerServer) Describe(ctx context.Context, req *pb.AuthorizerDescribeRequest) (*pb.AuthorizerDescribeResponse, error) {
	a, err := x.s.authorizer(req.GetType())
	if err != nil {
		return nil, err
	}
	auths, err := a.Describe(ctx)
	diags, err := diagnosticsOrStatus(err)
	if err != nil {
		return nil, err
	}
	resp := &pb.AuthorizerDescribeResponse{Diagnostics: diags, Authorizations: make([]*pb.Authorization, len(auths))}
	for i, au := range auths {
		resp.Authorizations[i] = authorizationToProto(au)
	}
	return resp, nil
}

func (x authorizerServer) Authorize(ctx context.Context, req *pb.AuthorizerAuthorizeRequest) (*pb.AuthorizerAuthorizeResponse, error) {
	a, err := x.s.authorizer(req.GetType())
	if err != nil {
		return nil, err
	}
	id, err := a.Authorize(ctx, authorizationFromProto(req.GetAuthorization()))
	diags, err := diagnosticsOrStatus(err)
	if err != nil {
		return nil, err
	}
	return &pb.AuthorizerAuthorizeResponse{Id: id, Diagnostics: diags}, nil
}

func (x authorizerServer) Revoke(ctx context.Context, req *pb.AuthorizerRevokeRequest) (*pb.AuthorizerRevokeResponse, error) {
	a, err := x.s.authorizer(req.GetType())
	if err != nil {
		return nil, err
	}
	diags, err := diagnosticsOrStatus(a.Revoke(ctx, req.GetId()))
	if err != nil {
		return nil, err
	}
	return &pb.AuthorizerRevokeResponse{Diagnostics: diags}, nil
}

// authorizerClient is the host side of one authorizer type.
type authorizerClient struct {
	c   *Client
	typ string
}

var _ nfs.Authorizer = authorizerClient{}

func (x authorizerClient) Validate(ctx context.Context, properties json.RawMessage) error {
	resp, err := x.c.authorizers.Validate(ctx, &pb.AuthorizerValidateRequest{Type: x.typ, Properties: properties})
	return x.c.check(ctx, "Validate", err, resp.GetDiagnostics())
}

func (x authorizerClient) Describe(ctx context.Context) ([]nfs.Authorization, error) {
	resp, err := x.c.authorizers.Describe(ctx, &pb.AuthorizerDescribeRequest{Type: x.typ})
	if err := x.c.check(ctx, "Describe", err, resp.GetDiagnostics()); err != nil {
		return nil, err
	}
	out := make([]nfs.Authorization, len(resp.GetAuthorizations()))
	for i, a := range resp.GetAuthorizations() {
		out[i] = authorizationFromProto(a)
	}
	return out, nil
}

func (x authorizerClient) Authorize(ctx context.Context, auth nfs.Authorization) (string, error) {
	resp, err := x.c.authorizers.Authorize(ctx, &pb.AuthorizerAuthorizeRequest{Type: x.typ, Authorization: authorizationToProto(auth)})
	if err := x.c.check(ctx, "Authorize", err, resp.GetDiagnostics()); err != nil {
		return "", err
	}
	if resp.GetId() == "" {
		return "", x.c.fail("Authorize", errors.New("provider returned no authorization ID"))
	}
	return resp.GetId(), nil
}

func (x authorizerClient) Revoke(ctx context.Context, id string) error {
	resp, err := x.c.authorizers.Revoke(ctx, &pb.AuthorizerRevokeRequest{Type: x.typ, Id: id})
	return x.c.check(ctx, "Revoke", err, resp.GetDiagnostics())
}
