// Package query is the "promql" metrics source: it answers an autoscale
// check's query with one number by an instant query to a Prometheus
// server's HTTP API, through the official client
// (github.com/prometheus/client_golang/api/prometheus/v1).
//
// A check needs one number, so a result is read as: a scalar, or a vector
// of one sample, gives its value; an empty vector is no data
// (Sample.Empty); a vector of several series is an error that says how
// many matched (aggregate with sum()); a range vector or a string is an
// error. NaN and ±Inf are no data as well, with a warning saying so: they
// come from 0/0 or x/0 (a rate divided by a count of members that has
// none), and a check must never act on them, while autoscale keeps the
// size on no data. A query Prometheus cannot parse is a
// provider.Diagnostics error at ["query"], so the core can point at the
// check's query attribute.
package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/infrakit/infrakit/sdk/metrics"
)

// Type is the metrics type the source serves: its query language.
const Type = "promql"

// Source is the "promql" metrics source. Its zero value is unconfigured
// (queries fail with an error naming the missing address) until Configure
// gives it the provider block; Configure may be called again, and the new
// configuration serves every query after it. It is safe for concurrent use.
type Source struct {
	mu     sync.RWMutex
	client *client // nil until configured with an address
}

var _ metrics.Source = (*Source)(nil)

// client is one configured connection to a server.
type client struct {
	cfg Config
	api v1.API
	hc  *httpClient
}

// New is a Source configured with cfg (as ParseConfig returns it).
func New(cfg Config) (*Source, error) {
	s := &Source{}
	if err := s.set(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// Configure reads the provider block's attributes (see ParseConfig) and
// serves queries with them from now on. Bad attributes are
// provider.Diagnostics and leave the previous configuration in place.
func (s *Source) Configure(ctx context.Context, raw json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		return err
	}
	return s.set(cfg)
}

func (s *Source) set(cfg Config) error {
	var c *client
	if cfg.Address != "" {
		hc, err := newHTTPClient(cfg)
		if err != nil {
			return err
		}
		ac, err := api.NewClient(api.Config{Address: cfg.Address, Client: hc.Client})
		if err != nil {
			return fmt.Errorf("prometheus address %q: %w", cfg.Address, err)
		}
		c = &client{cfg: cfg, api: v1.NewAPI(ac), hc: hc}
	}
	s.mu.Lock()
	old := s.client
	s.client = c
	s.mu.Unlock()
	if old != nil {
		old.hc.CloseIdleConnections()
	}
	return nil
}

// Close drops the idle connections to the server (their goroutines go
// with them). The Source still answers queries after, on new connections.
func (s *Source) Close() error {
	s.mu.RLock()
	c := s.client
	s.mu.RUnlock()
	if c != nil {
		c.hc.CloseIdleConnections()
	}
	return nil
}

// Address is the configured server's URL, "" when there is none.
func (s *Source) Address() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.client == nil {
		return ""
	}
	return s.client.cfg.Address
}

// ErrNoAddress is the error of a query to a Source whose provider block
// names no server.
var ErrNoAddress = errors.New(`the prometheus provider block sets no address; queries need one, such as address = "http://127.0.0.1:9090"`)

// Query evaluates query at time at (the zero time is the server's now) as
// the package describes.
func (s *Source) Query(ctx context.Context, query string, at time.Time) (metrics.Sample, error) {
	s.mu.RLock()
	c := s.client
	s.mu.RUnlock()
	if c == nil {
		return metrics.Sample{}, ErrNoAddress
	}
	qctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	v, warnings, infos, err := c.api.Query(qctx, query, at, v1.WithTimeout(c.cfg.Timeout))
	if err != nil {
		if ctx.Err() != nil { // the caller gave up, not the server
			return metrics.Sample{}, fmt.Errorf("query %q at %s: %w", query, c.cfg.Address, context.Cause(ctx))
		}
		return metrics.Sample{}, queryError(c.cfg.Address, query, c.cfg.Timeout, err)
	}
	if at.IsZero() {
		at = time.Now()
	}
	sample, err := Read(v, at)
	if err != nil {
		return metrics.Sample{}, fmt.Errorf("query %q: %w", query, err)
	}
	sample.Warnings = append(append(append([]string(nil), warnings...), prefixed("info: ", infos)...), sample.Warnings...)
	return sample, nil
}

func prefixed(prefix string, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = prefix + l
	}
	return out
}
