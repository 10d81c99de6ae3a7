package sim

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/infrakit/infrakit/sdk/metrics"
	"github.com/infrakit/infrakit/sdk/provider"
)

// MetricsType is the simulator's metrics query language: a query is the
// name of a metric, whose value is the number held by the file
// metrics/<name> in the store directory. Writing that file is how tests,
// and users trying out autoscaling, set the load an autoscale check sees;
// without the file the metric has no data.
const MetricsType = "file"

// metricName is the form of a simulator metric's name (a file name).
var metricName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// Metrics is the simulator's metrics source.
type Metrics struct{ dir string }

// Metrics returns the metrics source over the store's metrics directory.
func (s *Simulator) Metrics() *Metrics { return &Metrics{dir: filepath.Join(s.Dir(), "metrics")} }

var _ metrics.Source = (*Metrics)(nil)

// Query reads the value of metric query. The file is read whole each time,
// so a value written with a rename is never seen half-written.
func (m *Metrics) Query(ctx context.Context, query string, at time.Time) (metrics.Sample, error) {
	if err := ctx.Err(); err != nil {
		return metrics.Sample{}, err
	}
	name := strings.TrimSpace(query)
	if !metricName.MatchString(name) {
		return metrics.Sample{}, provider.AttributeError("Invalid metric name",
			fmt.Sprintf("A simulator metric is named like a file (letters, digits, _ . -); got %q.", query), "query")
	}
	if at.IsZero() {
		at = time.Now()
	}
	b, err := os.ReadFile(filepath.Join(m.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return metrics.Sample{Empty: true, At: at}, nil
	}
	if err != nil {
		return metrics.Sample{}, fmt.Errorf("metric %q: %w", name, err)
	}
	text := strings.TrimSpace(string(b))
	if text == "" {
		return metrics.Sample{Empty: true, At: at}, nil
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return metrics.Sample{}, fmt.Errorf("metric %q: the file %s holds %q, not a number", name, filepath.Join(m.dir, name), text)
	}
	return metrics.Sample{Value: v, At: at}, nil
}
