// Package metrics is the SPI of metrics sources: providers that answer a
// query with one number, which autoscale checks compare with their target.
//
// A source speaks its own query language (PromQL for the shipped
// prometheus provider); the core passes the query text through untouched.
package metrics

import (
	"context"
	"time"
)

// Sample is the answer to one query.
type Sample struct {
	// Value is the query's single value. It is 0 when Empty.
	Value float64
	// Empty says the query matched no data (an empty vector, say). A
	// consumer must not read it as 0: autoscale keeps the size on no data.
	Empty bool
	// At is the time the value is for (the evaluation time asked for, or
	// the source's own timestamp of the sample).
	At time.Time
	// Warnings the source returned beside the value.
	Warnings []string
}

// Source is the metrics SPI for one query language (the metadata object's
// type, "promql").
type Source interface {
	// Query evaluates query at time at (the zero time means now). A query
	// whose result is more than one series is an error that says how many
	// it matched: a check needs one number (aggregate with sum(), say).
	// A query the source cannot parse is a provider.Diagnostics error.
	Query(ctx context.Context, query string, at time.Time) (Sample, error)
}
