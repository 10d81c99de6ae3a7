package plugin

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/infrakit/infrakit/sdk/metrics"
	pb "github.com/infrakit/infrakit/sdk/proto/infrakit/provider/v1"
)

// Times travel as google.protobuf.Timestamp; the zero time.Time (now, in a
// request; not said, in an answer) travels as no timestamp, since
// timestamppb would otherwise send the year 1.

func timeToProto(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func timeFromProto(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

// metricsServer serves the Metrics service from ServeConfig.Metrics.
type metricsServer struct {
	pb.UnimplementedMetricsServer
	s *server
}

func (x metricsServer) Query(ctx context.Context, req *pb.MetricsQueryRequest) (*pb.MetricsQueryResponse, error) {
	src, err := x.s.metrics(req.GetType())
	if err != nil {
		return nil, err
	}
	sample, err := src.Query(ctx, req.GetQuery(), timeFromProto(req.GetTime()))
	diags, err := diagnosticsOrStatus(err)
	if err != nil {
		return nil, err
	}
	if diagnosticsFromProto(diags).HasErrors() {
		return &pb.MetricsQueryResponse{Diagnostics: diags}, nil // an error carries no result
	}
	return &pb.MetricsQueryResponse{
		Value:       sample.Value,
		Empty:       sample.Empty,
		Time:        timeToProto(sample.At),
		Warnings:    sample.Warnings,
		Diagnostics: diags,
	}, nil
}

// metricsClient is the host side of one metrics source type.
type metricsClient struct {
	c   *Client
	typ string
}

var _ metrics.Source = metricsClient{}

func (x metricsClient) Query(ctx context.Context, query string, at time.Time) (metrics.Sample, error) {
	resp, err := x.c.metrics.Query(ctx, &pb.MetricsQueryRequest{Type: x.typ, Query: query, Time: timeToProto(at)})
	if err := x.c.check(ctx, "Query", err, resp.GetDiagnostics()); err != nil {
		return metrics.Sample{}, err
	}
	s := metrics.Sample{
		Value:    resp.GetValue(),
		Empty:    resp.GetEmpty(),
		At:       timeFromProto(resp.GetTime()),
		Warnings: resp.GetWarnings(),
	}
	if s.Empty {
		s.Value = 0 // the SPI's promise, whatever a provider sent
	}
	return s, nil
}
