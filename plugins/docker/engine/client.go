// Package engine is a small client of the Docker Engine HTTP API: just the
// calls the docker provider (and its tests) make, over the Engine's unix
// socket (or plain TCP) with net/http. It does not depend on Docker's SDK.
//
// The API version is negotiated once per Client with GET /version: the
// highest version both sides speak, between MinAPIVersion and MaxAPIVersion.
// Every call is bounded by a deadline (Config.Timeout unless the caller's
// context ends sooner), so an Engine that stops answering makes calls fail,
// never hang; only an event stream (Events) lives as long as its context.
package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultHost is the Engine's address when DOCKER_HOST is unset.
const DefaultHost = "unix:///var/run/docker.sock"

// The API versions this client speaks. 1.41 (Docker 20.10) is what it is
// tested against; newer Engines are asked for at most MaxAPIVersion, whose
// shapes of the calls used here are the same.
const (
	MinAPIVersion = "1.41"
	MaxAPIVersion = "1.47"
)

// DefaultTimeout bounds each call that is not a stream.
const DefaultTimeout = 30 * time.Second

// Config is how a Client reaches the Engine.
type Config struct {
	// Host is "unix:///path/to/docker.sock" or "tcp://host:port" (plain
	// HTTP); empty means DefaultHost.
	Host string
	// Timeout bounds each call (other than streams); 0 means DefaultTimeout.
	Timeout time.Duration
}

// Client talks to one Docker Engine. It is safe for concurrent use.
type Client struct {
	host    string // as configured, for messages
	base    string // URL prefix without the version: "http://docker"
	http    *http.Client
	timeout time.Duration

	mu      sync.Mutex
	version string // negotiated; "" until the first successful negotiation
}

// New returns a Client for cfg.Host. It does not contact the Engine.
func New(cfg Config) (*Client, error) {
	host := cfg.Host
	if host == "" {
		host = DefaultHost
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("docker host %q: %w", host, err)
	}
	tr := &http.Transport{
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
	c := &Client{host: host, http: &http.Client{Transport: tr}, timeout: cfg.Timeout}
	switch u.Scheme {
	case "unix":
		path := u.Path
		if path == "" {
			return nil, fmt.Errorf("docker host %q: no socket path", host)
		}
		var d net.Dialer
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		}
		c.base = "http://docker"
	case "tcp", "http":
		if u.Host == "" {
			return nil, fmt.Errorf("docker host %q: no address", host)
		}
		c.base = "http://" + u.Host
	default:
		return nil, fmt.Errorf("docker host %q: unsupported scheme %q (want unix:// or tcp://; TLS is not supported)", host, u.Scheme)
	}
	return c, nil
}

// Host is the Engine address the Client was made for.
func (c *Client) Host() string { return c.host }

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Error is a non-success answer from the Engine.
type Error struct {
	Op      string // "POST /containers/create"
	Status  int
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("docker %s: %s (HTTP %d)", e.Op, e.Message, e.Status)
}

// IsNotFound reports whether err is the Engine's 404 (no such container, image, network).
func IsNotFound(err error) bool { return hasStatus(err, http.StatusNotFound) }

// IsConflict reports whether err is the Engine's 409 (name in use, removal in progress).
func IsConflict(err error) bool { return hasStatus(err, http.StatusConflict) }

func hasStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// Version is what GET /version answers (the fields used here).
type Version struct {
	Version       string `json:"Version"`
	APIVersion    string `json:"ApiVersion"`
	MinAPIVersion string `json:"MinAPIVersion"`
	Os            string `json:"Os"`
	Arch          string `json:"Arch"`
}

// ServerVersion asks the Engine for its version, without an API version
// prefix (every Engine answers that).
func (c *Client) ServerVersion(ctx context.Context) (Version, error) {
	var v Version
	err := c.send(ctx, request{method: http.MethodGet, path: "/version", unversioned: true}, &v)
	return v, err
}

// APIVersion negotiates the API version on first use and returns it.
func (c *Client) APIVersion(ctx context.Context) (string, error) {
	c.mu.Lock()
	v := c.version
	c.mu.Unlock()
	if v != "" {
		return v, nil
	}
	sv, err := c.ServerVersion(ctx)
	if err != nil {
		return "", err
	}
	v, err = Negotiate(sv.APIVersion)
	if err != nil {
		return "", fmt.Errorf("docker engine %s (version %s): %w", c.host, sv.Version, err)
	}
	c.mu.Lock()
	c.version = v
	c.mu.Unlock()
	return v, nil
}

// Negotiate picks the API version to speak with an Engine whose highest is
// server: the lower of server and MaxAPIVersion, which must not be below
// MinAPIVersion.
func Negotiate(server string) (string, error) {
	if _, ok := parseVersion(server); !ok {
		return "", fmt.Errorf("engine reports API version %q, which is not a version", server)
	}
	if compareVersions(server, MinAPIVersion) < 0 {
		return "", fmt.Errorf("engine speaks API %s; infrakit's docker provider needs %s or later (Docker 20.10)", server, MinAPIVersion)
	}
	if compareVersions(server, MaxAPIVersion) > 0 {
		return MaxAPIVersion, nil
	}
	return server, nil
}

// compareVersions compares "major.minor" API versions; malformed ones sort first.
func compareVersions(a, b string) int {
	va, _ := parseVersion(a)
	vb, _ := parseVersion(b)
	for i := range va {
		if va[i] != vb[i] {
			if va[i] < vb[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func parseVersion(s string) ([2]int, bool) {
	major, minor, ok := strings.Cut(s, ".")
	if !ok {
		return [2]int{}, false
	}
	a, err1 := strconv.Atoi(major)
	b, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil || a < 0 || b < 0 {
		return [2]int{}, false
	}
	return [2]int{a, b}, true
}

// request is one call to the Engine.
type request struct {
	method string
	path   string // without the version prefix: "/containers/json"
	query  url.Values
	body   any           // JSON-encoded unless it is an io.Reader
	ctype  string        // Content-Type of a reader body
	extra  time.Duration // added to the Client's timeout (a stop's grace)
	// unversioned sends path as is (GET /version).
	unversioned bool
}

// send makes the call, bounded by the Client's timeout, and decodes a JSON
// answer into out (when not nil). A non-2xx answer is an *Error; 304 Not
// Modified is success (start of a running or stop of a stopped container).
func (c *Client) send(ctx context.Context, r request, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout+r.extra)
	defer cancel()
	resp, err := c.open(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("docker %s %s: decode answer: %w", r.method, r.path, err)
	}
	return nil
}

// open makes the call and returns the response of a 2xx or 304 answer with
// its body unread; ctx bounds the body too. Any other answer is an *Error.
func (c *Client) open(ctx context.Context, r request) (*http.Response, error) {
	op := r.method + " " + r.path
	path := r.path
	if !r.unversioned {
		v, err := c.APIVersion(ctx)
		if err != nil {
			return nil, err
		}
		path = "/v" + v + path
	}
	u := c.base + path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	ctype := r.ctype
	switch b := r.body.(type) {
	case nil:
	case io.Reader:
		body = b
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("docker %s: encode request: %w", op, err)
		}
		body, ctype = bytes.NewReader(buf), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("docker %s: %w", op, err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("docker %s: no answer from the engine at %s: %w", op, c.host, ctx.Err())
		}
		return nil, fmt.Errorf("docker %s: cannot reach the engine at %s: %w", op, c.host, err)
	}
	if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusNotModified {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, &Error{Op: op, Status: resp.StatusCode, Message: errorMessage(resp.Body)}
}

// errorMessage reads the Engine's {"message": "..."} error body.
func errorMessage(r io.Reader) string {
	raw, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	var m struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &m) == nil && m.Message != "" {
		return m.Message
	}
	if s := strings.TrimSpace(string(raw)); s != "" {
		return s
	}
	return "no message"
}

// Filters select containers or events: {"label": ["k=v", "k"], "type": ["container"]}.
type Filters map[string][]string

// encode is the filters query parameter's value.
func (f Filters) encode() string {
	b, _ := json.Marshal(map[string][]string(f)) // a map of string slices always encodes
	return string(b)
}
