package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Environment variables the simulator reads at start-up (see ConfigFromEnv).
const (
	EnvDir            = "INFRAKIT_SIMULATOR_DIR"
	EnvProvisionDelay = "INFRAKIT_SIMULATOR_PROVISION_DELAY"
	EnvDescribeDelay  = "INFRAKIT_SIMULATOR_DESCRIBE_DELAY"
	EnvCapacity       = "INFRAKIT_SIMULATOR_CAPACITY"
	EnvFailureRate    = "INFRAKIT_SIMULATOR_FAILURE_RATE"
)

// DefaultDir is where objects live when INFRAKIT_SIMULATOR_DIR is unset,
// relative to the provider's working directory (the host starts providers in
// the stack's directory).
const DefaultDir = ".infrakit/simulator"

// DefaultWatchInterval is how often Watch polls the store.
const DefaultWatchInterval = 250 * time.Millisecond

// Config is how a Simulator behaves. The zero value of every knob means
// "off": no delays, no capacity cap, no failures.
type Config struct {
	// Dir is the store's root directory.
	Dir string
	// ProvisionDelay keeps a new instance pending for this long.
	ProvisionDelay time.Duration
	// DescribeDelay is slept before answering DescribeInstances.
	DescribeDelay time.Duration
	// Capacity caps the number of instances of each type; 0 is unlimited.
	Capacity int
	// FailureRate is the probability (0..1) that a Provision fails.
	FailureRate float64
	// WatchInterval is how often Watch polls; 0 means DefaultWatchInterval.
	WatchInterval time.Duration

	Logger hclog.Logger
	// Now and Rand are the clock and the failure-rate dice; nil means the
	// real clock and math/rand/v2. Tests replace them.
	Now  func() time.Time
	Rand func() float64
}

// ConfigFromEnv reads the knobs from the environment through getenv
// (os.Getenv in main). An unset variable leaves its knob off; a malformed one
// is an error naming the variable, so a typo never silently disables a fault.
//
//	INFRAKIT_SIMULATOR_DIR             store root (default .infrakit/simulator)
//	INFRAKIT_SIMULATOR_PROVISION_DELAY Go duration ("2s"): new instances stay pending that long
//	INFRAKIT_SIMULATOR_DESCRIBE_DELAY  Go duration: DescribeInstances sleeps that long first
//	INFRAKIT_SIMULATOR_CAPACITY        integer >= 0: max instances per type (0 = unlimited)
//	INFRAKIT_SIMULATOR_FAILURE_RATE    number in [0,1]: probability a Provision fails
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{Dir: getenv(EnvDir)}
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	var errs []error
	duration := func(name string, dst *time.Duration) {
		v := getenv(name)
		if v == "" {
			return
		}
		d, err := time.ParseDuration(v)
		if err == nil && d < 0 {
			err = errors.New("must not be negative")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want a duration like \"2s\": %w", name, v, err))
			return
		}
		*dst = d
	}
	duration(EnvProvisionDelay, &cfg.ProvisionDelay)
	duration(EnvDescribeDelay, &cfg.DescribeDelay)
	if v := getenv(EnvCapacity); v != "" {
		n, err := strconv.Atoi(v)
		if err == nil && n < 0 {
			err = errors.New("must not be negative")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want an integer >= 0: %w", EnvCapacity, v, err))
		}
		cfg.Capacity = n
	}
	if v := getenv(EnvFailureRate); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err == nil && !(f >= 0 && f <= 1) {
			err = errors.New("out of range")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want a probability between 0 and 1: %w", EnvFailureRate, v, err))
		}
		cfg.FailureRate = f
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("simulator: %w", err)
	}
	return cfg, nil
}

func (c Config) withDefaults() Config {
	if c.Dir == "" {
		c.Dir = DefaultDir
	}
	if c.WatchInterval <= 0 {
		c.WatchInterval = DefaultWatchInterval
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return c
}
