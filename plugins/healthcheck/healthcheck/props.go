package healthcheck

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/infrakit/infrakit/sdk/properties"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Defaults of the flavor's properties.
const (
	DefaultPath               = "/"
	DefaultExpectStatus       = 200
	DefaultTimeout            = time.Second
	DefaultHealthyThreshold   = 1
	DefaultUnhealthyThreshold = 2
)

// Properties are the decoded flavor properties.
type Properties struct {
	// HTTP is the HTTP check; nil means a TCP connect check.
	HTTP *HTTPCheck
	// Port, when not 0, is probed instead of the port of the instance's
	// address (a separate health port), or supplies one the address lacks.
	Port    int
	Timeout time.Duration
	Thresholds
}

// HTTPCheck is a GET of Path that passes when it answers ExpectStatus.
type HTTPCheck struct {
	Path         string
	ExpectStatus int
}

// Thresholds are how many consecutive probes must agree before the verdict
// changes.
type Thresholds struct {
	Healthy   int
	Unhealthy int
}

// Schema is the schema of the flavor's properties.
func Schema() provider.Schema {
	return provider.Schema{Attributes: map[string]provider.Attribute{
		"tcp": {Type: "bool",
			Description: "Probe by opening a TCP connection to the instance's address. The default when http is not set."},
		"http": {Type: "object({path=optional(string), expect_status=optional(number)})",
			Description: fmt.Sprintf("Probe with an HTTP GET of path (default %q) that must answer expect_status (default %d); redirects are not followed.", DefaultPath, DefaultExpectStatus)},
		"port": {Type: "number",
			Description: "Probe this port on the instance's host instead of the port of its address."},
		"timeout": {Type: "string",
			Description: fmt.Sprintf("How long one probe may take (a Go duration); default %s.", DefaultTimeout)},
		"healthy_threshold": {Type: "number",
			Description: fmt.Sprintf("Consecutive successful probes before an instance is healthy; default %d.", DefaultHealthyThreshold)},
		"unhealthy_threshold": {Type: "number",
			Description: fmt.Sprintf("Consecutive failed probes before an instance is unhealthy; default %d.", DefaultUnhealthyThreshold)},
	}}
}

var (
	topKeys  = []string{"tcp", "http", "port", "timeout", "healthy_threshold", "unhealthy_threshold"}
	httpKeys = []string{"path", "expect_status"}
)

// Parse decodes and checks the properties. Absent properties (empty or
// null) are a TCP check with the defaults. A non-nil error is
// provider.Diagnostics with one diagnostic per problem, each at the path of
// the offending attribute (["http", "path"], ["timeout"]).
func Parse(raw json.RawMessage) (Properties, error) {
	p := Properties{
		Timeout:    DefaultTimeout,
		Thresholds: Thresholds{Healthy: DefaultHealthyThreshold, Unhealthy: DefaultUnhealthyThreshold},
	}
	if properties.IsNull(raw) {
		return p, nil
	}
	var d properties.Decoder
	fields, ok := d.Object(raw, nil, topKeys, "the healthcheck flavor's properties")
	if !ok {
		return Properties{}, d.Err()
	}
	tcp, tcpSet := true, false
	if v, ok := fields.Get("tcp"); ok {
		tcp, tcpSet = d.Bool(v, []string{"tcp"})
	}
	if v, ok := fields.Get("http"); ok {
		p.HTTP = decodeHTTP(&d, v)
		if tcpSet && tcp {
			d.Errorf([]string{"tcp"}, "Conflicting checks", "Set either tcp = true or an http check, not both.")
		}
	} else if tcpSet && !tcp {
		d.Errorf([]string{"tcp"}, "No check", "tcp = false needs an http check instead; without either there is nothing to probe.")
	}
	if v, ok := fields.Get("port"); ok {
		if port, ok := d.Int(v, []string{"port"}); ok {
			if port < 1 || port > 65535 {
				d.Errorf([]string{"port"}, "Invalid port", "port = %d is not a TCP port (1-65535).", port)
			}
			p.Port = port
		}
	}
	if v, ok := fields.Get("timeout"); ok {
		if dur, ok := d.Duration(v, []string{"timeout"}); ok {
			if dur == 0 {
				d.Errorf([]string{"timeout"}, "Invalid duration", "timeout must be positive.")
			} else {
				p.Timeout = dur
			}
		}
	}
	for _, th := range []struct {
		key string
		dst *int
	}{{"healthy_threshold", &p.Healthy}, {"unhealthy_threshold", &p.Unhealthy}} {
		v, ok := fields.Get(th.key)
		if !ok {
			continue
		}
		if n, ok := d.Int(v, []string{th.key}); ok {
			if n < 1 {
				d.Errorf([]string{th.key}, "Invalid threshold", "%s must be at least 1, got %d.", th.key, n)
			}
			*th.dst = n
		}
	}
	if err := d.Err(); err != nil {
		return Properties{}, err
	}
	return p, nil
}

// decodeHTTP decodes the http check.
func decodeHTTP(d *properties.Decoder, raw json.RawMessage) *HTTPCheck {
	c := &HTTPCheck{Path: DefaultPath, ExpectStatus: DefaultExpectStatus}
	fields, ok := d.Object(raw, []string{"http"}, httpKeys, "http")
	if !ok {
		return c
	}
	if v, ok := fields.Get("path"); ok {
		if s, ok := d.String(v, []string{"http", "path"}); ok {
			if !strings.HasPrefix(s, "/") {
				d.Errorf([]string{"http", "path"}, "Invalid path", "http.path %q must start with \"/\".", s)
			}
			c.Path = s
		}
	}
	if v, ok := fields.Get("expect_status"); ok {
		if n, ok := d.Int(v, []string{"http", "expect_status"}); ok {
			if n < 100 || n > 599 {
				d.Errorf([]string{"http", "expect_status"}, "Invalid status", "http.expect_status = %d is not an HTTP status (100-599).", n)
			}
			c.ExpectStatus = n
		}
	}
	return c
}
