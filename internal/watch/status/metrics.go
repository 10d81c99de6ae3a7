package status

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metric names (all prefixed infrakit_). website/watch.md lists them; they
// are a contract with dashboards and alerts.
const (
	MetricPassDuration     = "infrakit_pass_duration_seconds"
	MetricPasses           = "infrakit_passes_total"
	MetricLastPass         = "infrakit_last_pass_timestamp_seconds"
	MetricInstances        = "infrakit_instances"
	MetricGroupDesiredSize = "infrakit_group_desired_size"
	MetricGroupBraked      = "infrakit_group_braked"
	MetricBrakeEngaged     = "infrakit_brake_engaged_total"
	MetricReplacements     = "infrakit_replacements_total"
	MetricProviderErrors   = "infrakit_provider_errors_total"
	MetricProviderRestarts = "infrakit_provider_restarts_total"
	MetricLeader           = "infrakit_leader"
	// The autoscaler's, per autoscaled group.
	MetricAutoscaleEvaluations = "infrakit_autoscale_evaluations_total"
	MetricAutoscaleDesired     = "infrakit_autoscale_desired_size"
	MetricAutoscaleRecommended = "infrakit_autoscale_recommended_size"
	MetricAutoscaleValue       = "infrakit_autoscale_metric_value"
	MetricAutoscaleNoData      = "infrakit_autoscale_no_data_total"
)

// passBuckets span a quiet pass over a few groups (milliseconds) to one that
// waits on a rolling update's replacements (minutes).
var passBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// metrics are a Recorder's Prometheus collectors and the registry they are
// registered on. Collectors are safe for concurrent use; the Recorder's lock
// only orders the updates that must agree with the status (instances).
type metrics struct {
	registry         *prometheus.Registry
	passDuration     prometheus.Histogram
	passes           *prometheus.CounterVec
	lastPass         prometheus.Gauge
	instances        *prometheus.GaugeVec
	desired          *prometheus.GaugeVec
	braked           *prometheus.GaugeVec
	brakeEngaged     *prometheus.CounterVec
	replacements     *prometheus.CounterVec
	providerErrors   *prometheus.CounterVec
	providerRestarts *prometheus.CounterVec
	leader           prometheus.Gauge

	autoscaleEvaluations *prometheus.CounterVec
	autoscaleDesired     *prometheus.GaugeVec
	autoscaleRecommended *prometheus.GaugeVec
	autoscaleValue       *prometheus.GaugeVec
	autoscaleNoData      *prometheus.CounterVec

	scaleOut scaleOutMetrics
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		passDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricPassDuration,
			Help:    "How long each reconcile pass over all groups took.",
			Buckets: passBuckets,
		}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPasses,
			Help: "Reconcile passes finished, by result (ok or error).",
		}, []string{"result"}),
		lastPass: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricLastPass,
			Help: "Unix time at which the last reconcile pass finished.",
		}),
		instances: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricInstances,
			Help: "Instances of each group as last observed, by state (pending, running, terminating) and health (healthy, unhealthy, unknown).",
		}, []string{"group", "state", "health"}),
		desired: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricGroupDesiredSize,
			Help: "Desired size of each group (size, or the number of logical IDs).",
		}, []string{"group"}),
		braked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricGroupBraked,
			Help: "1 while the mass-failure brake holds a group's replacements, else 0.",
		}, []string{"group"}),
		brakeEngaged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricBrakeEngaged,
			Help: "Times the mass-failure brake engaged on each group (a brief engagement shows here though a scrape misses the gauge).",
		}, []string{"group"}),
		replacements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricReplacements,
			Help: "Instances replaced, by group and reason (vanished, unhealthy, rolling-update, ...).",
		}, []string{"group", "reason"}),
		providerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricProviderErrors,
			Help: "Provider calls that failed, by provider key and SPI method.",
		}, []string{"provider", "method"}),
		providerRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricProviderRestarts,
			Help: "Provider processes relaunched after a crash or hang, by provider key.",
		}, []string{"provider"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricLeader,
			Help: "1 while this watch process is the leader that acts, else 0.",
		}),
		autoscaleEvaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricAutoscaleEvaluations,
			Help: "Autoscale evaluations of each group, by what they decided (scale-up, scale-down, hold).",
		}, []string{"group", "action"}),
		autoscaleDesired: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricAutoscaleDesired,
			Help: "The size the latest autoscale decision set or kept, per group.",
		}, []string{"group"}),
		autoscaleRecommended: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricAutoscaleRecommended,
			Help: "The latest autoscale recommendation before cooldown, stabilization, max_step and bounds, per group.",
		}, []string{"group"}),
		autoscaleValue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricAutoscaleValue,
			Help: "The value each autoscale check's query returned at the latest evaluation, per group and check.",
		}, []string{"group", "check"}),
		autoscaleNoData: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricAutoscaleNoData,
			Help: "Autoscale evaluations whose check had no value (the query failed or matched nothing), per group and check.",
		}, []string{"group", "check"}),
	}
	m.registry.MustRegister(
		m.passDuration, m.passes, m.lastPass, m.instances, m.desired, m.braked, m.brakeEngaged,
		m.replacements, m.providerErrors, m.providerRestarts, m.leader,
		m.autoscaleEvaluations, m.autoscaleDesired, m.autoscaleRecommended, m.autoscaleValue, m.autoscaleNoData,
		// The process's own CPU, memory and goroutines, which the bench
		// and operators watch for an idle service.
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.scaleOut = newScaleOutMetrics(m.registry)
	// Both results exist from the start, so rate() has a series to work on
	// before the first failure.
	m.passes.WithLabelValues(passOK)
	m.passes.WithLabelValues(passError)
	return m
}

const (
	passOK    = "ok"
	passError = "error"
)

// removeGroup drops every series of a group that left the stack, so
// dashboards stop showing it.
func (m *metrics) removeGroup(name string) {
	l := prometheus.Labels{"group": name}
	m.instances.DeletePartialMatch(l)
	m.desired.DeletePartialMatch(l)
	m.braked.DeletePartialMatch(l)
	m.brakeEngaged.DeletePartialMatch(l)
	m.replacements.DeletePartialMatch(l)
	m.autoscaleEvaluations.DeletePartialMatch(l)
	m.autoscaleDesired.DeletePartialMatch(l)
	m.autoscaleRecommended.DeletePartialMatch(l)
	m.autoscaleValue.DeletePartialMatch(l)
	m.autoscaleNoData.DeletePartialMatch(l)
	m.scaleOut.groupPasses.DeletePartialMatch(l)
}

// removeProvider drops the series of a provider no longer in the stack.
func (m *metrics) removeProvider(key string) {
	l := prometheus.Labels{"provider": key}
	m.providerErrors.DeletePartialMatch(l)
	m.providerRestarts.DeletePartialMatch(l)
}
