package query

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/provider"
)

// listedSeries is how many of a result's series an error about too many
// names, so a user sees which labels set them apart.
const listedSeries = 3

// Read turns an instant query's result into the one number a check needs,
// as the package describes; at is the evaluation time, the Sample's At
// when the result carries no timestamp of its own (an empty vector).
func Read(v model.Value, at time.Time) (metrics.Sample, error) {
	switch r := v.(type) {
	case *model.Scalar:
		return number(float64(r.Value), r.Timestamp.Time()), nil
	case model.Vector:
		switch len(r) {
		case 0:
			return metrics.Sample{Empty: true, At: at}, nil
		case 1:
			if r[0].Histogram != nil {
				return metrics.Sample{}, fmt.Errorf("the result is a native histogram (%s), not a number: take one out with histogram_quantile(), histogram_sum() or histogram_count()", r[0].Metric)
			}
			return number(float64(r[0].Value), r[0].Timestamp.Time()), nil
		default:
			return metrics.Sample{}, fmt.Errorf("the query matched %d series (%s), but a check needs one number: aggregate them, with sum(...) say", len(r), seriesList(r))
		}
	case model.Matrix:
		return metrics.Sample{}, fmt.Errorf("the result is a range vector (%d series), but a check needs one number at one time: drop the [range] or wrap it in a function such as rate(...[1m]) or avg_over_time(...[1m])", len(r))
	case *model.String:
		return metrics.Sample{}, fmt.Errorf("the result is a string (%q), not a number", r.Value)
	case nil:
		return metrics.Sample{}, errors.New("the server returned no result")
	default:
		return metrics.Sample{}, fmt.Errorf("the result is a %s, not a number", v.Type())
	}
}

// number is a Sample of value f, or no data with a warning when f is NaN
// or infinite.
func number(f float64, at time.Time) metrics.Sample {
	switch {
	case math.IsNaN(f):
		return metrics.Sample{Empty: true, At: at, Warnings: []string{
			"the query's value is NaN (0/0: a ratio over no data, say); taken as no data"}}
	case math.IsInf(f, 0):
		return metrics.Sample{Empty: true, At: at, Warnings: []string{
			fmt.Sprintf("the query's value is %v (a division by zero); taken as no data", f)}}
	}
	return metrics.Sample{Value: f, At: at}
}

// seriesList names the first few series of a vector, and how many more.
func seriesList(vec model.Vector) string {
	names := make([]string, 0, listedSeries+1)
	for i, s := range vec {
		if i == listedSeries {
			names = append(names, fmt.Sprintf("and %d more", len(vec)-listedSeries))
			break
		}
		names = append(names, s.Metric.String())
	}
	return strings.Join(names, ", ")
}

// queryError is the error of a failed query: a PromQL syntax or type error
// (the API's bad_data) as a diagnostic at ["query"]; anything else as an
// error that names the server.
func queryError(address, query string, timeout time.Duration, err error) error {
	var apiErr *v1.Error
	if errors.As(err, &apiErr) {
		switch apiErr.Type {
		case v1.ErrBadData:
			return provider.AttributeError("Invalid PromQL query", fmt.Sprintf("%s rejects %q: %s", address, query, apiErr.Msg), "query")
		case v1.ErrBadResponse, v1.ErrClient, v1.ErrServer: // types the client gives answers that are not the API's
			return fmt.Errorf("query %q: %s answered %s: is it a Prometheus server (or one behind a proxy that wants a token)? %s",
				query, address, apiErr.Msg, firstLine(apiErr.Detail))
		}
		return fmt.Errorf("query %q at %s: %s: %s", query, address, apiErr.Type, apiErr.Msg)
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err // the URL says where; address says it shorter
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("query %q: %s did not answer within %s (the provider block's timeout): %w", query, address, timeout, err)
	}
	return fmt.Errorf("query %q: %s: %w", query, address, err)
}

// firstLine is a response body's first line, cut short: enough to tell a
// proxy's login page or a 404 from a Prometheus.
func firstLine(body string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(body), "\n")
	if len(line) > 200 {
		line = line[:200] + "..."
	}
	return line
}
