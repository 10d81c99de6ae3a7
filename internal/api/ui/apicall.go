package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/infrakit/infrakit/internal/api"
)

// cookieName is the cookie the token is kept in after sign-in; the API
// reads it for GET and HEAD.
const cookieName = api.CookieName

// maxReply bounds what one in-process API answer may hold: far more than
// any read of a stack the API accepts.
const maxReply = 64 << 20

// apiError is an answer of the API other than 2xx, with the diagnostic it
// carried.
type apiError struct {
	Status  int
	Summary string
	Detail  string
}

func (e *apiError) Error() string {
	if e.Detail == "" {
		return e.Summary
	}
	return e.Summary + ": " + e.Detail
}

// unauthorized: the API wants the token (or another one).
func unauthorized(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusUnauthorized
}

// reply is what the in-process API call wrote: a minimal
// http.ResponseWriter that keeps everything.
type reply struct {
	header http.Header
	status int
	body   bytes.Buffer
	over   bool
}

func newReply() *reply { return &reply{header: http.Header{}} }

func (r *reply) Header() http.Header { return r.header }

func (r *reply) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *reply) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len()+len(b) > maxReply {
		r.over = true
		return 0, errors.New("ui: API answer too large")
	}
	return r.body.Write(b)
}

// caller calls the API in-process on behalf of one visitor's request.
type caller struct {
	api http.Handler
	// from is the visitor's request: its Host (the API checks it),
	// remote address (the API logs it) and context.
	from *http.Request
	// token is sent as "Authorization: Bearer"; "" sends none.
	token string
}

// readCaller calls the API with the visitor's sign-in cookie, if any.
func (s *site) readCaller(r *http.Request) caller {
	c := caller{api: s.api, from: r}
	if ck, err := r.Cookie(cookieName); err == nil {
		c.token = ck.Value
	}
	return c
}

// do sends one request to the API and returns its answer.
func (c caller) do(ctx context.Context, method, path string, body any) (*reply, error) {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequestWithContext(ctx, method, path, rd)
	if err != nil {
		return nil, err
	}
	req.Host = c.from.Host
	req.RemoteAddr = c.from.RemoteAddr
	req.TLS = c.from.TLS
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if ua := c.from.Header.Get("User-Agent"); ua != "" {
		req.Header.Set("User-Agent", ua)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	rep := newReply()
	c.api.ServeHTTP(rep, req)
	if rep.status == 0 {
		rep.status = http.StatusOK
	}
	if rep.over {
		return nil, fmt.Errorf("%s %s: the answer is larger than %d bytes", method, path, maxReply)
	}
	return rep, nil
}

// get reads path into v; an answer other than 200 is an *apiError.
func (c caller) get(ctx context.Context, path string, v any) error {
	rep, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if rep.status != http.StatusOK {
		return errorOf(rep)
	}
	if err := json.Unmarshal(rep.body.Bytes(), v); err != nil {
		return &apiError{Status: http.StatusBadGateway, Summary: "The API answered no JSON the UI understands",
			Detail: fmt.Sprintf("GET %s: %v", path, err)}
	}
	return nil
}

// verbResult is the answer of a verb: what the CLI would exit with and
// print.
type verbResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// post runs a verb; an answer other than 200 is an *apiError.
func (c caller) post(ctx context.Context, path string, body any) (verbResult, error) {
	var out verbResult
	rep, err := c.do(ctx, http.MethodPost, path, body)
	if err != nil {
		return out, err
	}
	if rep.status != http.StatusOK {
		return out, errorOf(rep)
	}
	if err := json.Unmarshal(rep.body.Bytes(), &out); err != nil {
		return out, &apiError{Status: http.StatusBadGateway, Summary: "The API answered no JSON the UI understands",
			Detail: fmt.Sprintf("POST %s: %v", path, err)}
	}
	return out, nil
}

// errorOf reads the error an answer carries: the API's {"error":
// {"summary", "detail"}} or the status endpoints' {"error": "..."}.
func errorOf(rep *reply) *apiError {
	e := &apiError{Status: rep.status, Summary: http.StatusText(rep.status)}
	var doc struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(rep.body.Bytes(), &doc) != nil || len(doc.Error) == 0 {
		e.Detail = strings.TrimSpace(rep.body.String())
		return e
	}
	var diag struct {
		Summary string `json:"summary"`
		Detail  string `json:"detail"`
	}
	var text string
	switch {
	case json.Unmarshal(doc.Error, &diag) == nil && diag.Summary != "":
		e.Summary, e.Detail = diag.Summary, diag.Detail
	case json.Unmarshal(doc.Error, &text) == nil:
		e.Detail = text
	}
	return e
}
