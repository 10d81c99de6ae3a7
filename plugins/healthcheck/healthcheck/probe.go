package healthcheck

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// target is the host:port to probe for an instance address ("host:port" or
// "host"): the address's port unless port overrides it; an HTTP check falls
// back to port 80 when there is neither.
func target(address string, port int, isHTTP bool) (string, error) {
	host, p, err := net.SplitHostPort(address)
	if err != nil {
		// No port in the address: all of it is the host.
		host, p = strings.TrimSuffix(strings.TrimPrefix(address, "["), "]"), ""
	}
	if port != 0 {
		p = strconv.Itoa(port)
	}
	if p == "" {
		if !isHTTP {
			return "", fmt.Errorf("address %q has no port; set the port property", address)
		}
		p = "80"
	}
	if host == "" {
		return "", fmt.Errorf("address %q has no host", address)
	}
	return net.JoinHostPort(host, p), nil
}

// prober runs single probes. Every probe opens a fresh connection and
// closes it: a health check must see what a new client would, and no idle
// connection outlives a probe.
type prober struct {
	client *http.Client
	dialer net.Dialer
}

func newProber() *prober {
	transport := &http.Transport{
		Proxy:              nil, // probe the instance, never a proxy from the environment
		DisableKeepAlives:  true,
		DisableCompression: true,
	}
	return &prober{client: &http.Client{
		Transport: transport,
		// The status the instance answered is what is judged, redirects included.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// maxBody is how much of a response body a probe reads before closing it.
const maxBody = 64 << 10

// probe runs one check of p against addr (host:port) within ctx. It returns
// nil when the check passes, or why it failed.
func (pr *prober) probe(ctx context.Context, p Properties, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	if p.HTTP == nil {
		conn, err := pr.dialer.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return conn.Close()
	}
	url := "http://" + addr + p.HTTP.Path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "infrakit-healthcheck")
	resp, err := pr.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	if resp.StatusCode != p.HTTP.ExpectStatus {
		return fmt.Errorf("GET %s answered %d, want %d", url, resp.StatusCode, p.HTTP.ExpectStatus)
	}
	return nil
}

// close releases the transport's connections.
func (pr *prober) close() { pr.client.CloseIdleConnections() }
