// Package remote is the client side of the remote CLI: `infrakit
// -address=URL COMMAND ...` sends the command to a running `infrakit
// watch` (POST /v1/cli, website/api.md) and prints what the watch answers,
// as if the command had run here. A Client only speaks the protocol: it
// sends a Request, returns the Response or an *Error, and answers a
// command's question (POST /v1/cli/SESSION). What to send and how to print
// the answer is package command's (remote.go).
package remote

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// The environment of the remote CLI.
const (
	// EnvAddress is the watch's URL when -address is not given.
	EnvAddress = "INFRAKIT_ADDR"
	// EnvToken is the bearer token sent with every request.
	EnvToken = "INFRAKIT_TOKEN"
	// EnvCACert names a PEM file of the certificate authority to trust for
	// an https address (instead of the system's).
	EnvCACert = "INFRAKIT_CACERT"
	// EnvClientCert and EnvClientKey name the PEM certificate and key the
	// client presents to a watch that requires client certificates
	// (-tls-client-ca), as NOMAD_CLIENT_CERT and NOMAD_CLIENT_KEY do.
	EnvClientCert = "INFRAKIT_CLIENT_CERT"
	EnvClientKey  = "INFRAKIT_CLIENT_KEY"
)

// TLSFiles are the PEM files of an https address: the CA to trust (the
// system's when empty) and the client's certificate and key (none when
// empty).
type TLSFiles struct {
	CA, Cert, Key string
}

// maxAnswer bounds an answer's body: the watch's own limit on bodies is
// 8 MiB, and a command's output with a saved plan stays below a few times
// that.
const maxAnswer = 64 << 20

// Request is one command to run (POST /v1/cli).
type Request struct {
	// Command is the command's words: "group scale".
	Command string `json:"command"`
	// Args are the command's arguments as the user typed them, but for
	// names of files that lie outside the directory.
	Args []string `json:"args"`
	// Files are the client's files the command reads, by the names Args use
	// (and the directory's stack files by their names in it).
	Files map[string][]byte `json:"files"`
	// Dir is the base name of the client's directory, which names a stack
	// without a stack block.
	Dir string `json:"dir,omitempty"`
	// Env holds the client's INFRAKIT_VAR_* variables.
	Env map[string]string `json:"env,omitempty"`
	// Terminal says the client prints to a terminal, where colors are
	// allowed.
	Terminal bool `json:"terminal"`
}

// Response is what the command printed and its exit code, or the
// question it waits at.
type Response struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	// Files are the files the command wrote (plan -out), by the names it
	// was given, relative to the client's directory.
	Files map[string][]byte `json:"files,omitempty"`
	// Question, when set, is a prompt the command waits at; send the
	// answer with Client.Answer and Session. ExitCode means nothing then.
	Question string `json:"question,omitempty"`
	Session  string `json:"session,omitempty"`
}

// Error is a request that did not run: the watch could not be reached or
// answered an error. Summary and Detail are a diagnostic as the CLI prints
// it.
type Error struct {
	// StatusCode is the HTTP status, 0 when there was no answer.
	StatusCode int
	Summary    string
	Detail     string
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return e.Summary
	}
	return e.Summary + ": " + e.Detail
}

// Unauthorized reports whether the watch refused the token.
func (e *Error) Unauthorized() bool { return e.StatusCode == http.StatusUnauthorized }

// Client talks to one watch.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// New returns a client of the watch at addr (http://HOST:PORT or
// https://HOST:PORT) that sends token (none when empty). For an https
// address, caFile, when set, is a PEM file of the certificate authorities
// to trust instead of the system's.
func New(addr, token, caFile string) (*Client, error) {
	return NewTLS(addr, token, TLSFiles{CA: caFile})
}

// NewTLS is New with a client certificate too.
func NewTLS(addr, token string, files TLSFiles) (*Client, error) {
	caFile := files.CA
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("the address must be a URL such as http://127.0.0.1:24864 or https://HOST:PORT; got %q", addr)
	}
	u.Path = ""
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if u.Scheme == "https" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if caFile != "" {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", EnvCACert, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%s: %s holds no PEM certificate", EnvCACert, caFile)
			}
			cfg.RootCAs = pool
		}
		if (files.Cert == "") != (files.Key == "") {
			return nil, fmt.Errorf("give both %s and %s, or neither", EnvClientCert, EnvClientKey)
		}
		if files.Cert != "" {
			cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
			if err != nil {
				return nil, fmt.Errorf("%s and %s: %w", EnvClientCert, EnvClientKey, err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		transport.TLSClientConfig = cfg
	}
	// No timeout of its own: an apply runs as long as it runs, bounded by
	// the watch's -api-timeout and by the caller's context (Ctrl-C).
	return &Client{base: u, token: token, http: &http.Client{Transport: transport}}, nil
}

// Address is the watch's URL, for messages.
func (c *Client) Address() string { return c.base.String() }

// Run sends req and returns the command's answer.
func (c *Client) Run(ctx context.Context, req Request) (Response, error) {
	return c.post(ctx, "/v1/cli", req)
}

// Answer answers the question session waits at and returns what the
// command printed next (perhaps another question).
func (c *Client) Answer(ctx context.Context, session, answer string) (Response, error) {
	return c.post(ctx, "/v1/cli/"+url.PathEscape(session), struct {
		Answer string `json:"answer"`
	}{answer})
}

func (c *Client) post(ctx context.Context, path string, body any) (Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return Response{}, &Error{Summary: "Error encoding the request", Detail: err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.JoinPath(path).String(), bytes.NewReader(b))
	if err != nil {
		return Response{}, &Error{Summary: "Error making the request", Detail: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Response{}, c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return Response{}, c.transportError(ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Response{}, c.statusError(resp, data)
	}
	var out Response
	if err := json.Unmarshal(data, &out); err != nil {
		return Response{}, &Error{StatusCode: resp.StatusCode, Summary: "Unexpected answer from the watch",
			Detail: fmt.Sprintf("%s answered %s that is not the remote CLI's JSON (%v): is it infrakit watch?", c.Address(), resp.Status, err)}
	}
	return out, nil
}

// transportError is a request that got no answer.
func (c *Client) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &Error{Summary: "Interrupted", Detail: fmt.Sprintf(
			"the command was interrupted; the watch at %s stops it as it stops an interrupted command (what was done is recorded)", c.Address())}
	}
	var unknownCA x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	if errors.As(err, &unknownCA) || errors.As(err, &verify) || errors.As(err, &hostname) || errors.As(err, &invalid) {
		return &Error{Summary: "The watch's certificate is not trusted", Detail: fmt.Sprintf(
			"%v\n\nSet %s to a PEM file of the certificate authority that signed the certificate of the watch at %s.",
			err, EnvCACert, c.Address())}
	}
	return &Error{Summary: "Cannot reach the watch", Detail: fmt.Sprintf(
		"%v\n\nIs infrakit watch serving at %s? The address is -address or %s.", err, c.Address(), EnvAddress)}
}

// statusError is an answer other than 2xx: the API's error body
// {"error": {"summary", "detail"}}, or the status itself.
func (c *Client) statusError(resp *http.Response, data []byte) error {
	var body struct {
		Error struct {
			Summary string `json:"summary"`
			Detail  string `json:"detail"`
		} `json:"error"`
	}
	e := &Error{StatusCode: resp.StatusCode}
	if json.Unmarshal(data, &body) == nil && body.Error.Summary != "" {
		e.Summary, e.Detail = body.Error.Summary, body.Error.Detail
	} else {
		e.Summary = "The watch answered " + resp.Status
		e.Detail = strings.TrimSpace(string(data))
	}
	if resp.StatusCode == http.StatusUnauthorized {
		// The watch's summary says which ("No API token", "Wrong API
		// token"); the detail says what to do about it here.
		if e.Summary == "" || strings.HasPrefix(e.Summary, "The watch answered") {
			e.Summary = "Unauthorized"
		}
		e.Summary += " (401 Unauthorized)"
		what := "refused the token"
		if c.token == "" {
			what = "wants a token"
		}
		e.Detail = fmt.Sprintf("the watch at %s %s: set %s to the token in its .infrakit/api-token, or in the file its -token-file names",
			c.Address(), what, EnvToken)
	}
	return e
}
