package query

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/api"

	"github.com/infrakit/infrakit/sdk/provider"
)

// httpClient is the HTTP client of one configuration, with the transport
// whose idle connections Close drops.
type httpClient struct {
	*http.Client
	transport *http.Transport
}

func (c *httpClient) CloseIdleConnections() { c.transport.CloseIdleConnections() }

// newHTTPClient builds the client cfg asks for: the API client's default
// transport settings, the CA bundle of ca_file, and a bearer token read
// from bearer_token_file at each request. A CA file that cannot be read is
// a diagnostic at ca_file; a token file is only checked for being
// readable now (it is read again at every request).
func newHTTPClient(cfg Config) (*httpClient, error) {
	base, ok := api.DefaultRoundTripper.(*http.Transport)
	if !ok {
		return nil, errors.New("the Prometheus API client's default transport is not an *http.Transport")
	}
	tr := base.Clone()
	if cfg.CAFile != "" {
		pool, err := loadCAs(cfg.CAFile)
		if err != nil {
			return nil, provider.AttributeError("Invalid CA file", err.Error(), "ca_file")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var rt http.RoundTripper = tr
	if cfg.BearerTokenFile != "" {
		if _, err := readToken(cfg.BearerTokenFile); err != nil {
			return nil, provider.AttributeError("Invalid bearer token file", err.Error(), "bearer_token_file")
		}
		rt = &bearer{file: cfg.BearerTokenFile, next: tr}
	}
	return &httpClient{Client: &http.Client{Transport: rt}, transport: tr}, nil
}

// loadCAs reads a PEM bundle of certificates.
func loadCAs(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// readToken reads a bearer token file: its content without surrounding
// white space (a trailing newline, as editors and `echo` leave), not empty.
func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s is empty", file)
	}
	return tok, nil
}

// bearer adds "Authorization: Bearer <token>" to each request, reading
// the token file each time so a rotated token is used at once.
type bearer struct {
	file string
	next http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := readToken(b.file)
	if err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, fmt.Errorf("bearer_token_file: %w", err)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok)
	return b.next.RoundTrip(req)
}
