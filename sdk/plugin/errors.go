package plugin

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
	"github.com/infrakit/infrakit/sdk/provider"
)

var (
	// ErrUnavailable is wrapped by errors of calls that did not reach the
	// provider or lost it midway: its process exited or the connection broke.
	// A host relaunches such a provider (see Client.Exited).
	ErrUnavailable = errors.New("provider unavailable")

	// ErrChecksumMismatch is wrapped by Start's error when the binary's
	// sha256 differs from ClientConfig.SHA256.
	ErrChecksumMismatch = errors.New("checksum mismatch")
)

// --- provider side: Go errors to the wire ---

// diagnosticsOrStatus splits a provider's error: Diagnostics travel in the
// response, anything else becomes a gRPC status error.
func diagnosticsOrStatus(err error) ([]*pb.Diagnostic, error) {
	if err == nil {
		return nil, nil
	}
	var diags provider.Diagnostics
	if errors.As(err, &diags) {
		return diagnosticsToProto(diags), nil
	}
	return nil, statusOf(err)
}

func statusOf(err error) error {
	code := codes.Unknown
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		code = codes.Unimplemented
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	}
	return status.Error(code, err.Error())
}

func diagnosticsToProto(ds provider.Diagnostics) []*pb.Diagnostic {
	out := make([]*pb.Diagnostic, len(ds))
	for i, d := range ds {
		sev := pb.Diagnostic_SEVERITY_ERROR // an unset severity is an error: it was returned as one
		if d.Severity == provider.Warning {
			sev = pb.Diagnostic_SEVERITY_WARNING
		}
		out[i] = &pb.Diagnostic{Severity: sev, Summary: d.Summary, Detail: d.Detail, AttributePath: d.Path}
	}
	return out
}

// --- host side: the wire to Go errors ---

func diagnosticsFromProto(ds []*pb.Diagnostic) provider.Diagnostics {
	if len(ds) == 0 {
		return nil
	}
	out := make(provider.Diagnostics, len(ds))
	for i, d := range ds {
		sev := provider.Error
		if d.GetSeverity() == pb.Diagnostic_SEVERITY_WARNING {
			sev = provider.Warning
		}
		out[i] = provider.Diagnostic{Severity: sev, Summary: d.GetSummary(), Detail: d.GetDetail(), Path: d.GetAttributePath()}
	}
	return out
}

// errorFromStatus turns a gRPC error of a call made with ctx back into
// something errors.Is can classify, without gRPC's "rpc error: code = ...
// desc =" noise. A cancellation the caller did not ask for is the
// connection closing under the call.
func errorFromStatus(ctx context.Context, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	switch st.Code() {
	case codes.Unavailable:
		return withMessage(ErrUnavailable, msg)
	case codes.Unimplemented:
		return withMessage(errors.ErrUnsupported, msg)
	case codes.DeadlineExceeded:
		return withMessage(context.DeadlineExceeded, msg)
	case codes.Canceled:
		if ctx.Err() == nil {
			return withMessage(ErrUnavailable, msg)
		}
		return withMessage(context.Canceled, msg)
	default:
		return errors.New(msg)
	}
}

func withMessage(sentinel error, msg string) error {
	if msg == "" || msg == sentinel.Error() {
		return sentinel
	}
	return fmt.Errorf("%w: %s", sentinel, msg)
}
