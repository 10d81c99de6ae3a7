package healthcheck

import "github.com/infrakit/infrakit/sdk/flavor"

// Counter is what the flavor remembers about one instance: the run of
// consecutive probe results it is in and the verdict so far. The zero value
// is an instance never probed: unknown.
type Counter struct {
	Successes int // consecutive successful probes, 0 after a failure
	Failures  int // consecutive failed probes, 0 after a success
	verdict   flavor.Health
}

// Observe returns the counter after one more probe. The verdict changes only
// when a run reaches its threshold: healthy after th.Healthy successes in a
// row, unhealthy after th.Unhealthy failures in a row; in between, the
// previous verdict stands (unknown until the first threshold is reached), so
// a single dropped probe does not flap a healthy instance.
func (c Counter) Observe(ok bool, th Thresholds) Counter {
	if ok {
		c.Successes, c.Failures = c.Successes+1, 0
		if c.Successes >= th.Healthy {
			c.verdict = flavor.HealthHealthy
		}
	} else {
		c.Successes, c.Failures = 0, c.Failures+1
		if c.Failures >= th.Unhealthy {
			c.verdict = flavor.HealthUnhealthy
		}
	}
	return c
}

// Health is the verdict so far.
func (c Counter) Health() flavor.Health {
	if c.verdict == "" {
		return flavor.HealthUnknown
	}
	return c.verdict
}
