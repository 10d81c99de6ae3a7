package query

import (
	"encoding/json"
	"net/url"
	"time"

	"github.com/infrakit/infrakit/sdk/properties"
	"github.com/infrakit/infrakit/sdk/provider"
)

// DefaultTimeout bounds one query when the provider block sets no timeout:
// long enough for a heavy PromQL expression, short enough that a hung
// server never holds an evaluation for long.
const DefaultTimeout = 10 * time.Second

// Config is the provider block's configuration of the Prometheus server to
// query.
type Config struct {
	// Address is the server's base URL ("http://127.0.0.1:9090", or one
	// with a path prefix when Prometheus runs behind a proxy). Empty means
	// the block set none: queries fail, the file_sd authorizer still works.
	Address string
	// Timeout bounds each query, on the client and (as the API's timeout
	// parameter) on the server.
	Timeout time.Duration
	// BearerTokenFile holds a token sent as "Authorization: Bearer ...",
	// read at every request so a rotated token is picked up, as Prometheus
	// itself reads bearer_token_file.
	BearerTokenFile string
	// CAFile is a PEM bundle of the certificate authorities that sign an
	// https server's certificate, instead of the system's.
	CAFile string
}

// configKeys are the provider block's attributes.
var configKeys = []string{"address", "timeout", "bearer_token_file", "ca_file"}

// ConfigSchema describes the provider block's attributes.
func ConfigSchema() provider.Schema {
	return provider.Schema{Attributes: map[string]provider.Attribute{
		"address": {Type: "string",
			Description: `the Prometheus server's URL, http or https ("http://127.0.0.1:9090"); required to query, not to keep file_sd files`},
		"timeout": {Type: "string",
			Description: `how long one query may take ("10s", the default)`},
		"bearer_token_file": {Type: "string",
			Description: "a file holding a bearer token sent with every request (read at each request)"},
		"ca_file": {Type: "string",
			Description: "a PEM file of the certificate authorities an https address is verified with"},
	}}
}

// ParseConfig reads the provider block's attributes (a JSON object; empty
// or null is the empty block). Problems come back as provider.Diagnostics
// with the attribute's path, all at once.
func ParseConfig(raw json.RawMessage) (Config, error) {
	c := Config{Timeout: DefaultTimeout}
	if properties.IsNull(raw) {
		return c, nil
	}
	var d properties.Decoder
	fields, ok := d.Object(raw, nil, configKeys, `the "prometheus" provider block`)
	if !ok {
		return c, d.Err()
	}
	if v, ok := fields.Get("address"); ok {
		if s, ok := d.String(v, []string{"address"}); ok {
			c.Address = s
			checkAddress(&d, s)
		}
	}
	if v, ok := fields.Get("timeout"); ok {
		if t, ok := d.Duration(v, []string{"timeout"}); ok {
			if t == 0 {
				d.Errorf([]string{"timeout"}, "Invalid duration", `timeout must be longer than 0, such as "10s".`)
			}
			c.Timeout = t
		}
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"bearer_token_file", &c.BearerTokenFile}, {"ca_file", &c.CAFile}} {
		if v, ok := fields.Get(f.key); ok {
			if s, ok := d.String(v, []string{f.key}); ok {
				if s == "" {
					d.Errorf([]string{f.key}, "Empty file name", "%s names no file; leave it out instead.", f.key)
				}
				*f.dst = s
			}
		}
	}
	if c.CAFile != "" && c.Address != "" && !isHTTPS(c.Address) {
		d.Errorf([]string{"ca_file"}, "ca_file without https",
			"ca_file verifies an https server, but address %q is http.", c.Address)
	}
	return c, d.Err()
}

// checkAddress accepts an absolute http or https URL with a host and no
// query, fragment or credentials (credentials belong in
// bearer_token_file, not in a URL that ends up in logs).
func checkAddress(d *properties.Decoder, s string) {
	path := []string{"address"}
	u, err := url.Parse(s)
	switch {
	case s == "":
		d.Errorf(path, "Missing address", `address names no server; write one such as "http://127.0.0.1:9090".`)
	case err != nil:
		d.Errorf(path, "Invalid address", "%q is not a URL: %v.", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		d.Errorf(path, "Invalid address", `%q is not an http or https URL; write one such as "http://127.0.0.1:9090".`, s)
	case u.Host == "" || u.Hostname() == "":
		d.Errorf(path, "Invalid address", "%q names no host.", s)
	case u.User != nil:
		d.Errorf(path, "Invalid address", "%q carries credentials; put a token in bearer_token_file instead.", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		d.Errorf(path, "Invalid address", "%q has a query or fragment; the address is the server's base URL.", s)
	}
}

func isHTTPS(address string) bool {
	u, err := url.Parse(address)
	return err == nil && u.Scheme == "https"
}
